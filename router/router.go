package router

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/batchagent/batchagent/llm"
)

// DefaultMaxInflight is a deployment's in-flight limit when neither its
// MaxInflight nor its model's declared default concurrency sets one.
const DefaultMaxInflight = 64

// DefaultCooldown is how long a deployment's open breaker refuses calls
// before it lets a probe through.
const DefaultCooldown = 5 * time.Second

// DefaultFailureThreshold is how many consecutive failures open a
// deployment's breaker.
const DefaultFailureThreshold = 3

// Deployment is one place a model is served from.
type Deployment struct {
	// Name labels the deployment in metrics and errors. Defaults to
	// "d0", "d1", … by position.
	Name string
	// Model is the deployment's backend. Required; it must be safe for
	// concurrent use.
	Model llm.Model
	// Weight scales the deployment's share among equally loaded ones.
	// Defaults to 1; must not be negative.
	Weight float64
	// MaxInflight caps its calls in flight. Defaults to the model's
	// declared default concurrency (llm.Capabilities), else
	// DefaultMaxInflight.
	MaxInflight int
	// FixedInflight keeps the limit at MaxInflight instead of adapting it.
	FixedInflight bool
	// RPM caps its calls per minute. Zero means no cap.
	RPM int
}

// Config configures a [Router].
type Config struct {
	// Deployments are the deployments of the model, at least one.
	Deployments []Deployment
	// Cooldown is how long an open breaker refuses calls before a probe.
	// Defaults to DefaultCooldown.
	Cooldown time.Duration
	// FailureThreshold is how many consecutive failures open a breaker.
	// Defaults to DefaultFailureThreshold.
	FailureThreshold int
}

// Router is an llm.Model over several deployments of one model (see the
// package documentation). It is safe for concurrent use; its
// configuration does not change after New.
type Router struct {
	deps      []*deployment
	streaming bool
	caps      llm.Capabilities

	mu sync.Mutex // protects the deployments' inflight, limit, clean, ewma and freed
	// freed is closed, and replaced, when a slot is released.
	freed chan struct{}
}

// deployment is one Deployment and its admission.
type deployment struct {
	Deployment
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	limiter *rate.Limiter // nil: no RPM cap

	// Guarded by Router.mu.
	inflight int
	limit    int
	clean    int     // calls answered cleanly since the limit last changed
	ewma     float64 // observed latency, seconds; 0 before the first answer

	requests, failures int64 // guarded by Router.mu
}

// New returns a Router over cfg's deployments. It returns an error when
// cfg names none, or one has no Model or a negative Weight, MaxInflight or
// RPM.
func New(cfg Config) (*Router, error) {
	if len(cfg.Deployments) == 0 {
		return nil, errors.New("router: no deployments")
	}
	if cfg.Cooldown < 0 || cfg.FailureThreshold < 0 {
		return nil, fmt.Errorf("router: negative cooldown (%v) or failure threshold (%d)", cfg.Cooldown, cfg.FailureThreshold)
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.FailureThreshold == 0 {
		cfg.FailureThreshold = DefaultFailureThreshold
	}
	r := &Router{freed: make(chan struct{}), streaming: true}
	seen := map[string]bool{}
	for i, d := range cfg.Deployments {
		if d.Name == "" {
			d.Name = fmt.Sprintf("d%d", i)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("router: deployments[%d]: name %q used twice", i, d.Name)
		}
		seen[d.Name] = true
		if d.Model == nil {
			return nil, fmt.Errorf("router: deployments[%d] (%s): no model", i, d.Name)
		}
		if d.Weight < 0 || math.IsNaN(d.Weight) || math.IsInf(d.Weight, 0) || d.MaxInflight < 0 || d.RPM < 0 {
			return nil, fmt.Errorf("router: deployments[%d] (%s): weight (%v), max_inflight (%d) and rpm (%d) must be finite and not negative", i, d.Name, d.Weight, d.MaxInflight, d.RPM)
		}
		if d.Weight == 0 {
			d.Weight = 1
		}
		var caps llm.Capabilities
		if c, ok := d.Model.(llm.Capable); ok {
			caps = c.Capabilities()
		}
		if d.MaxInflight == 0 {
			d.MaxInflight = caps.DefaultConcurrency
		}
		if d.MaxInflight == 0 {
			d.MaxInflight = DefaultMaxInflight
		}
		if _, ok := d.Model.(llm.Streamer); !ok {
			r.streaming = false
		}
		r.caps = merge(r.caps, caps, i == 0)
		dep := &deployment{Deployment: d, limit: d.MaxInflight}
		if d.RPM > 0 {
			dep.limiter = rate.NewLimiter(rate.Limit(float64(d.RPM)/60), 1)
		}
		threshold := uint32(cfg.FailureThreshold)
		dep.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        d.Name,
			MaxRequests: 1,
			Timeout:     cfg.Cooldown,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
			// Only the deployment's own failures count against it: a
			// refused request or a caller's cancellation says nothing
			// about its health.
			IsSuccessful: func(err error) bool { return !unhealthy(err) },
		})
		r.deps = append(r.deps, dep)
	}
	r.caps.Streaming = r.streaming
	return r, nil
}

// merge folds one deployment's capabilities into the router's: a
// feature is declared only when every deployment has it, and the
// default concurrency is their sum.
func merge(acc, c llm.Capabilities, first bool) llm.Capabilities {
	if first {
		c.QueueProbe = false // the router is no QueueProber
		return c
	}
	acc.NativeTools = acc.NativeTools && c.NativeTools
	acc.NativeJSONSchema = acc.NativeJSONSchema && c.NativeJSONSchema
	acc.PromptCaching = acc.PromptCaching && c.PromptCaching
	acc.InProcess = acc.InProcess && c.InProcess
	acc.DefaultConcurrency += c.DefaultConcurrency
	acc.Extra = mergeExtra(acc.Extra, c.Extra)
	if acc.Media != c.Media {
		acc.Media = llm.Media{} // text only, unless all take the same media
	}
	return acc
}

// mergeExtra returns the extra request fields that two deployments both
// send on (verbatim or translated): a call may go to either. When either
// answers one choice a call, so does the merge (a gateway then fans n
// out rather than sending it on).
func mergeExtra(a, b llm.ExtraFields) llm.ExtraFields {
	one := a.OneChoice || b.OneChoice
	switch {
	case a.Verbatim && b.Verbatim:
		a.OneChoice = one
		return a
	case a.Verbatim:
		b.OneChoice = one
		return b
	case b.Verbatim:
		a.OneChoice = one
		return a
	}
	var both []string
	for _, name := range strings.Fields(a.Translated) {
		if b.Accepts(name) {
			both = append(both, name)
		}
	}
	return llm.ExtraFields{Translated: strings.Join(both, " "), OneChoice: one}
}

// unhealthy reports whether err says the deployment itself failed: it
// could not be reached, timed out, or answered 5xx.
func unhealthy(err error) bool {
	return errors.Is(err, llm.ErrConnection) || errors.Is(err, llm.ErrTimeout) || errors.Is(err, llm.ErrServer)
}

// rerun reports whether a call that failed with err, having shown its
// caller nothing, may run again on another deployment: the deployment
// could not be reached or died mid-answer (llm.ErrConnection: refused,
// reset, a body cut before its end; a 502 from a proxy in front of it),
// answered a 5xx or a body that does not parse (llm.ErrServer, as a cut
// answer without a length reads), or said it is overloaded
// (llm.ErrOverloaded: a 503 from one going down). A timeout is not: the
// call has spent its time, and the engine's retry decides.
func rerun(err error) bool {
	return errors.Is(err, llm.ErrConnection) || errors.Is(err, llm.ErrServer) || errors.Is(err, llm.ErrOverloaded)
}

// Capabilities returns what every deployment declares (see llm.Capable):
// a feature only when all have it; DefaultConcurrency is their sum, and
// Streaming holds when every deployment streams.
func (r *Router) Capabilities() llm.Capabilities { return r.caps }

// MaxInflight returns the sum of the deployments' in-flight limits: the
// most calls the router runs at once.
func (r *Router) MaxInflight() int {
	n := 0
	for _, d := range r.deps {
		n += d.MaxInflight
	}
	return n
}

// Generate sends req to the least-loaded healthy deployment, and again to
// another one, each at most once, while they fail to connect, die
// mid-answer (the request sent, the answer cut), or answer 502, 503 or
// another 5xx: the caller has seen nothing of a non-streamed answer, so
// it is run again whole. It returns
// the last deployment's error when none answered, an *llm.APIError
// wrapping llm.ErrConnection when every breaker is open, and ctx's error
// when it ends while the call waits for a slot.
func (r *Router) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	tried := make([]bool, len(r.deps))
	for {
		d, done, err := r.acquire(ctx, tried)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		resp, err := d.Model.Generate(ctx, req)
		r.release(d, done, start, err)
		if err != nil && rerun(err) && ctx.Err() == nil && r.another(tried) {
			continue
		}
		return resp, err
	}
}

// Stream streams req from the least-loaded healthy deployment; a stream
// that fails before its first event (a rate-limit report aside), as
// Generate's calls that run again do, is started again on another
// deployment, each at most once. A stream cut after it has yielded part
// of the answer is not replayed: it ends with that error, since the part
// cannot be taken back. Under a context marked by llm.WithWholeAnswer
// (the caller shows nothing until the answer is whole) the events are
// held back until the deployment's stream ends, and a stream cut
// mid-answer is started again on another deployment, as Generate does. The errors are Generate's. A
// deployment whose model does not stream yields an error: Capabilities
// says Streaming only when all of them do.
func (r *Router) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		tried := make([]bool, len(r.deps))
		whole := llm.WantsWholeAnswer(ctx)
		for {
			d, done, err := r.acquire(ctx, tried)
			if err != nil {
				yield(llm.Event{}, err)
				return
			}
			s, ok := d.Model.(llm.Streamer)
			if !ok {
				err := fmt.Errorf("router: deployment %s does not stream", d.Name)
				r.release(d, done, time.Now(), nil)
				yield(llm.Event{}, err)
				return
			}
			start := time.Now()
			if whole {
				evs, err := collect(s.Stream(ctx, req))
				r.release(d, done, start, err)
				if err != nil && rerun(err) && ctx.Err() == nil && r.another(tried) {
					continue
				}
				for _, ev := range evs {
					if !yield(ev, nil) {
						return
					}
				}
				if err != nil {
					yield(llm.Event{}, err)
				}
				return
			}
			first, retry := true, false
			var last error
			for ev, err := range s.Stream(ctx, req) {
				if err != nil {
					last = err
					if first && rerun(err) && ctx.Err() == nil && r.another(tried) {
						retry = true
						break
					}
				}
				if ev.Type != llm.EventRateLimit {
					// A rate-limit report says nothing of the answer:
					// the stream may still start again elsewhere.
					first = false
				}
				if !yield(ev, err) {
					break
				}
				if err != nil {
					break
				}
			}
			r.release(d, done, start, last)
			if !retry {
				return
			}
		}
	}
}

// collect gathers a stream's events up to its end or its first error.
func collect(seq iter.Seq2[llm.Event, error]) ([]llm.Event, error) {
	var evs []llm.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Forward sends an OpenAI endpoint's body (embeddings, legacy
// completions: see llm.Forwarder) to the least-loaded healthy deployment,
// and again to another one, each at most once, while they fail to
// connect or answer 502, 503 or another 5xx, as Generate does. The
// deployment's slot is held until the answer's headers have come, not
// while its body is read: a body cut after that reaches the caller as
// it is. A deployment
// that serves no such endpoint answers an *llm.APIError of class
// llm.ErrBadRequest.
func (r *Router) Forward(ctx context.Context, path string, body []byte) (*http.Response, error) {
	tried := make([]bool, len(r.deps))
	for {
		d, done, err := r.acquire(ctx, tried)
		if err != nil {
			return nil, err
		}
		f, ok := d.Model.(llm.Forwarder)
		if !ok {
			r.release(d, done, time.Now(), nil)
			return nil, &llm.APIError{Backend: "router", Err: llm.ErrBadRequest, Message: "router: deployment " + d.Name + " does not serve " + path}
		}
		start := time.Now()
		resp, err := f.Forward(ctx, path, body)
		r.release(d, done, start, err)
		if err != nil && rerun(err) && ctx.Err() == nil && r.another(tried) {
			continue
		}
		return resp, err
	}
}

// another reports whether a deployment not yet tried is left.
func (r *Router) another(tried []bool) bool {
	for _, t := range tried {
		if !t {
			return true
		}
	}
	return false
}

// acquire takes a slot on the best deployment not yet tried, waiting
// while every healthy one is full, and marks it tried. done reports the
// call's outcome to its breaker.
func (r *Router) acquire(ctx context.Context, tried []bool) (*deployment, func(error), error) {
	for {
		r.mu.Lock()
		d, i, open := r.pickLocked(tried)
		if d == nil && open {
			r.mu.Unlock()
			return nil, nil, &llm.APIError{Backend: "router", Err: llm.ErrConnection,
				Message: "every deployment is failing (their circuit breakers are open)"}
		}
		if d != nil {
			done, err := d.breaker.Allow()
			if err != nil {
				// Open, or half-open with its probe already out: skip
				// it and choose again.
				tried[i] = true
				r.mu.Unlock()
				if !r.another(tried) {
					return nil, nil, &llm.APIError{Backend: "router", Err: llm.ErrConnection,
						Message: "every deployment is failing (their circuit breakers are open)"}
				}
				continue
			}
			d.inflight++
			d.requests++
			tried[i] = true
			r.mu.Unlock()
			if d.limiter != nil {
				if err := d.limiter.Wait(ctx); err != nil {
					r.release(d, done, time.Now(), nil)
					return nil, nil, err
				}
			}
			return d, done, nil
		}
		freed := r.freed
		r.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
	}
}

// pickLocked returns the best deployment not tried whose breaker is not
// open and that has a free slot, with its index. When it returns none,
// open reports that no untried deployment is left outside an open
// breaker (waiting would not help).
func (r *Router) pickLocked(tried []bool) (best *deployment, at int, open bool) {
	var bestLoad, bestLat float64
	open = true
	for i, d := range r.deps {
		if tried[i] {
			continue
		}
		switch d.breaker.State() {
		case gobreaker.StateOpen:
			continue
		case gobreaker.StateHalfOpen:
			// Its cooldown is over: the next call probes it, so that a
			// deployment back in service is found even when the others
			// are idle and faster.
			if d.inflight == 0 {
				return d, i, false
			}
			open = false
			continue
		}
		open = false
		if d.inflight >= d.limit {
			continue
		}
		load := float64(d.inflight) / float64(d.limit)
		lat := d.ewma / d.Weight
		if best == nil || load < bestLoad-1e-9 || (math.Abs(load-bestLoad) <= 1e-9 && lat < bestLat) {
			best, at, bestLoad, bestLat = d, i, load, lat
		}
	}
	return best, at, open
}

// release frees d's slot, reports err to its breaker, and adapts its
// limit and latency.
func (r *Router) release(d *deployment, done func(error), start time.Time, err error) {
	done(err)
	elapsed := time.Since(start).Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	d.inflight--
	switch {
	case err == nil:
		if d.ewma == 0 {
			d.ewma = elapsed
		} else {
			d.ewma = 0.8*d.ewma + 0.2*elapsed
		}
		if !d.FixedInflight {
			if d.clean++; d.clean >= d.limit && d.limit < d.MaxInflight {
				d.limit++
				d.clean = 0
			}
		}
	case errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrOverloaded):
		if !d.FixedInflight {
			d.limit = max(1, d.limit/2)
			d.clean = 0
		}
	}
	if err != nil && unhealthy(err) {
		d.failures++
	}
	close(r.freed)
	r.freed = make(chan struct{})
}

// Stats is a snapshot of one deployment's admission.
type Stats struct {
	// Name is the deployment's name.
	Name string
	// Inflight counts its calls in flight; Limit is its in-flight limit now.
	Inflight, Limit int
	// Requests counts the calls sent to it; Failures those that failed
	// with a connection failure, a timeout or a 5xx.
	Requests, Failures int64
	// State is its breaker's state: "closed", "open" or "half-open".
	State string
	// Latency is its observed latency (EWMA); zero before its first answer.
	Latency time.Duration
}

// Stats returns a snapshot of every deployment's admission, in
// configuration order.
func (r *Router) Stats() []Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Stats, len(r.deps))
	for i, d := range r.deps {
		out[i] = Stats{Name: d.Name, Inflight: d.inflight, Limit: d.limit, Requests: d.requests, Failures: d.failures,
			State: d.breaker.State().String(), Latency: time.Duration(d.ewma * float64(time.Second))}
	}
	return out
}
