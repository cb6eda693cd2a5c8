package engine

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/admission"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// A gate is one backend's admission, shared by every job of the engine
// whose Spec names that backend (Model and model name): a sched.Gate fed
// with what the backend's answers say.
type gate struct {
	model llm.Model
	name  string
	g     *sched.Gate
	gated bool // g is consulted for every model call
	count func(*llm.Request) int
	cont  time.Duration // Admission.Continuation
	// unanswered counts the gate's calls that got no answer: the
	// engine's counter.
	unanswered *atomic.Int64
}

// backendKey is the key of a comparable model's gate.
type backendKey struct {
	m    llm.Model
	name string
}

// gateOf returns the gate of spec's backend, building it on first use.
func (e *Engine) gateOf(spec *job.Spec) (*gate, error) {
	m, name := spec.Model()
	return e.gateFor(m, name, spec)
}

// gateFor returns the gate of the backend m serves under name, building
// it on first use; own keys the gate of an incomparable m, which cannot
// be shared (nil: a gate of its own, not kept).
func (e *Engine) gateFor(m llm.Model, name string, own any) (*gate, error) {
	var key any = backendKey{m, name}
	if !reflect.TypeOf(m).Comparable() {
		key = own
	}
	e.gatesMu.Lock()
	defer e.gatesMu.Unlock()
	if g, ok := e.gates[key]; ok {
		return g, nil
	}
	a, err := e.opt.admissionOf(m, name)
	if err != nil {
		return nil, err
	}
	a.Config.Stop, a.Config.Logger = e.drained, e.log
	if a.Count == nil {
		a.Count = requestTokens
	}
	sg, err := sched.NewGate(a.Config)
	if err != nil {
		return nil, err
	}
	g := &gate{model: m, name: name, g: sg, gated: a.Gated, count: a.Count, cont: a.Continuation, unanswered: &e.stats.unanswered}
	if key != nil {
		e.gates[key] = g
		e.order = append(e.order, g)
	}
	return g, nil
}

// requestTokens counts about four bytes a token over the request's text.
func requestTokens(req *llm.Request) int { return (req.TextBytes() + 3) / 4 }

// Gates returns a snapshot of each backend's admission, in the order the
// engine's specs first named them.
func (e *Engine) Gates() []admission.Stats {
	e.gatesMu.Lock()
	gates := append([]*gate(nil), e.order...)
	e.gatesMu.Unlock()
	s := make([]admission.Stats, len(gates))
	for i, g := range gates {
		st := g.g.Stats()
		s[i] = admission.Stats{Backend: admission.Backend{Model: g.model, Name: g.name}, Inflight: st.Inflight, Waiting: st.Waiting,
			Limit: st.Limit, LimitHistory: st.LimitHistory, Throttles: st.Throttles, Pauses: st.Pauses,
			RateLimits: admission.RateLimit{RPM: st.RPM, TPM: st.TPM, OTPM: st.OTPM}}
	}
	return s
}

// classGate is the agent.Gate of one job's agents: the backend's gate, in
// the job's priority class, each call in the flow its context names.
type classGate struct {
	g     *gate
	class sched.Class
}

// flowKey is the context key of the scheduling flow of an agent's calls:
// each run is a flow, and so are each spec's Submits; the flows of a class
// take turns for the backend's slots.
type flowKey struct{}

// serviceKey is the context key of an agent's *service: what the
// scheduling policies know of the agent's model calls so far.
type serviceKey struct{}

// service is one agent's model service: the time its model calls held a
// slot, and when the last one ended. The agent's calls follow one another,
// but its permits may be released from another goroutine, hence atomics.
type service struct {
	attained atomic.Int64 // ns
	lastEnd  atomic.Int64 // UnixNano; 0 before the first call ends
}

// withService returns ctx carrying a fresh service record for one agent.
func withService(ctx context.Context) context.Context {
	return context.WithValue(ctx, serviceKey{}, new(service))
}

// order returns the sched.Order of a call of an agent with the service
// record sv (nil: none) and priority, now.
func (c *classGate) order(sv *service, priority int, now time.Time) sched.Order {
	o := sched.Order{Priority: priority}
	if sv == nil {
		return o
	}
	o.Attained = time.Duration(sv.attained.Load())
	if last := sv.lastEnd.Load(); c.g.cont > 0 && last != 0 && now.Sub(time.Unix(0, last)) <= c.g.cont {
		o.Continuing = true
	}
	return o
}

// Acquire waits for the backend's gate, placed by the gate's policy with
// what the context's service record says of the agent. Once the engine
// drains, the waits for prefix warming and pauses end with
// agent.ErrStopped. The agent's timeout does not run while it waits
// (workClock).
func (c *classGate) Acquire(ctx context.Context, priority int, req *llm.Request) (agent.Permit, error) {
	flow, _ := ctx.Value(flowKey{}).(uint64)
	sv, _ := ctx.Value(serviceKey{}).(*service)
	tokens := 0
	if c.g.g.CountsTokens() { // counting re-reads the whole conversation
		tokens = c.g.count(req)
	}
	resume := pauseWork(ctx)
	t, err := c.g.g.AcquireOrder(ctx, c.class, flow, c.order(sv, priority, time.Now()), tokens)
	resume()
	err = admitErr(err)
	if errors.Is(err, sched.ErrStopped) {
		return nil, agent.ErrStopped
	}
	if err != nil {
		return nil, err
	}
	return &permit{t: t, sv: sv, start: time.Now(), unanswered: c.g.unanswered}, nil
}

// LastAnswer returns when a call last succeeded or began to get its
// answer; agents restart their outage clocks after it (agent.AnswerGate).
func (c *classGate) LastAnswer() time.Time { return c.g.g.LastAnswer() }

// permit is one admitted call.
type permit struct {
	t     *sched.Ticket
	sv    *service // the agent's, credited at Release; nil: none
	start time.Time
	began bool // the backend began to answer
	// unanswered counts the calls that got no answer; nil: not counted.
	unanswered *atomic.Int64
}

// Answering records that the backend began to answer the call (its first
// streamed event, agent.AnswerPermit).
func (p *permit) Answering() {
	p.began = true
	p.t.Answering()
}

// Release frees the slot and tells the gate what the answer says of the
// backend. A call that got no answer is counted apart (Counts.Unanswered):
// its connection failed before any answer, without an HTTP status
// (refused, reset, a name that did not resolve), or it was abandoned (a
// cancellation, a deadline) before its answer began.
func (p *permit) Release(resp *llm.Response, err error) {
	if p.sv != nil {
		now := time.Now()
		p.sv.attained.Add(int64(now.Sub(p.start)))
		p.sv.lastEnd.Store(now.UnixNano())
	}
	o := sched.Outcome{Err: err, Signal: signalOf(err)}
	if o.Signal == sched.SignalCongested {
		o.RetryAfter = llm.RetryAfter(err)
	}
	if p.unanswered != nil && !p.began && unanswered(err) {
		p.unanswered.Add(1)
	}
	rl := llm.RateLimitOf(err) // a 429 says how the account stands too
	if resp != nil {
		o.Tokens = int(resp.Usage.Total())
		o.OutputTokens = int(resp.Usage.CompletionTokens)
		rl = resp.RateLimit
	}
	if rl != nil {
		o.LimitRequests, o.LimitTokens = rl.LimitRequests, rl.LimitTokens
		o.RemainingRequests, o.RemainingTokens = rl.RemainingRequests, rl.RemainingTokens
		o.LimitOutputTokens, o.RemainingOutputTokens = rl.LimitOutputTokens, rl.RemainingOutputTokens
	}
	p.t.Release(o)
}

// signalOf maps a model call's error to what it says of the backend.
func signalOf(err error) sched.Signal {
	switch {
	case err == nil:
		return sched.SignalOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return sched.SignalAbandoned // the caller gave up: nothing learnt
	case errors.Is(err, llm.ErrRateLimited), errors.Is(err, llm.ErrOverloaded):
		return sched.SignalCongested
	}
	if _, ok := errors.AsType[*llm.APIError](err); !ok {
		return sched.SignalAbandoned // not the backend's answer (a stopped agent, a misuse)
	}
	if errors.Is(err, llm.ErrConnection) {
		return sched.SignalConnection
	}
	return sched.SignalFailed
}

// unanswered reports whether err, the error of a call whose answer never
// began, says no server answered it: a connection failure without an
// HTTP status, or the caller's cancellation or deadline. A proxy's 502
// is an answer.
func unanswered(err error) bool {
	if ae, ok := errors.AsType[*llm.APIError](err); ok {
		return ae.StatusCode == 0 && errors.Is(err, llm.ErrConnection)
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classed is an error of package sched with the sentinel of package job
// that names its class added: its message is the error's own, and
// errors.Is finds both sentinels in it. Package job does not import
// sched, so the engine, which sees both, joins them where an admission
// error crosses into an agent's result.
type classed struct {
	err, class error
}

func (e *classed) Error() string   { return e.err.Error() }
func (e *classed) Unwrap() []error { return []error{e.err, e.class} }

// unavailable returns err, a gate's error declaring its backend down
// (wrapping sched.ErrUnavailable), with job.ErrBackendUnavailable added;
// nil for nil.
func unavailable(err error) error {
	if err == nil || !errors.Is(err, sched.ErrUnavailable) || errors.Is(err, job.ErrBackendUnavailable) {
		return err
	}
	return &classed{err: err, class: job.ErrBackendUnavailable}
}

// admitErr returns err, a gate's admission error, with
// job.ErrLimitUnavailable added when it wraps sched.ErrSharedUnavailable
// (a shared limit's store out of reach, which agents wait out) and
// job.ErrBackendUnavailable when it wraps sched.ErrUnavailable.
func admitErr(err error) error {
	if err != nil && errors.Is(err, sched.ErrSharedUnavailable) && !errors.Is(err, job.ErrLimitUnavailable) {
		err = &classed{err: err, class: job.ErrLimitUnavailable}
	}
	return unavailable(err)
}
