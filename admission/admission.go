package admission

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// Backend names a backend for batchagent.Config.Backends: the llm.Model value and
// the model name a Spec sends to it. Model must be comparable (every
// backend of this module is a pointer); a Spec whose Model is not gets an
// admission of its own.
type Backend struct {
	Model llm.Model
	Name  string
}

// Config configures how model calls to one backend are admitted:
// concurrency, rate, backpressure and prefix warming. The zero value
// adapts the concurrency from the backend's declared default and applies
// no rate limit.
type Config struct {
	// MaxInflight caps concurrent model calls. Defaults to the backend's
	// declared default concurrency (llm.Capabilities), and to unlimited
	// when it declares none. Unless FixedInflight is set, the limit adapts
	// within [1, MaxInflight] (AIMD): halved when the backend rate-limits
	// or is overloaded, raised by one after a window of clean calls,
	// starting from the backend's default when it is lower.
	MaxInflight int
	// FixedInflight keeps the limit at MaxInflight. Defaults to false.
	FixedInflight bool
	// SharedInflight, if set, returns a concurrency limit the backend b
	// shares with other processes (package queue's SharedSlots keeps one
	// in Redis, adapting as MaxInflight does here): every model call to b
	// also holds one of its slots, so that workers on many processes
	// together keep at most that limit in flight. It is called once per
	// backend, when a job first names it; a nil SharedSlots means none
	// for b, and an error fails the jobs that name b. Defaults to nil:
	// the inflight limit is per process.
	SharedInflight func(b Backend) (sched.SharedSlots, error)
	// RateLimit paces calls to requests and tokens per minute. Defaults to
	// none.
	RateLimit RateLimit
	// Backpressure pauses admission while a self-hosted server's queue is
	// long, for backends that can report it. Defaults to on for them.
	Backpressure Backpressure
	// Policy orders the model calls that wait for one of the backend's
	// slots, within a job (see [Policy]). Defaults to DefaultPolicy.
	Policy Policy
	// Continuation is the window of cache-aware continuation: an agent
	// whose previous model call ended at most this long ago (its tool
	// calls were quick) goes before the agents that wait for a slot
	// without, whatever the Policy, so that its next turn reaches the
	// server while its prompt prefix is still cached. Zero, the default,
	// turns it off: under the default policy an agent back from its tools
	// already goes before the agents that have done fewer turns, and
	// `bench agentic` measured no gain from continuation on top of it.
	// It helps PolicyFIFO and PolicyLAS, which interleave all agents.
	Continuation time.Duration
	// WarmPrefix sends the first model call alone and admits the others
	// only when it returns, so the backend's prefix cache holds the shared
	// prefix before the work arrives. Defaults to false.
	WarmPrefix bool
	// StartWindow is how long connection failures may last, from the
	// first, before any model call of a run got an answer, until the run
	// declares the backend unavailable ([job.ErrBackendUnavailable]). Defaults
	// to DefaultStartWindow; NoStartWindow turns the check off. Until the
	// backend has answered any call of the engine, the window is at most
	// FirstStartWindow (1s): a wrong URL fails fast.
	StartWindow time.Duration
	// NoStartWindow turns the unavailability check off: StartWindow must
	// then be zero.
	NoStartWindow bool
	// PauseBackoff spaces the pauses of admission after connection
	// failures (each twice the last, capped by Max and by 5s). Defaults to
	// job.Backoff's defaults.
	PauseBackoff job.Backoff
}

// Policy names an order of the model calls that wait for a backend's
// slots (see [Config.Policy]).
type Policy string

// The policies.
const (
	// PolicyFIFO serves calls in the order they began to wait.
	PolicyFIFO Policy = "fifo"
	// PolicyTurns serves the agent with the most turns done first: each
	// turn done counts as having waited sched.DefaultBoost rounds longer
	// (a round lasts about one model call while the slots are full), so an
	// agent near its end finishes before fresh ones start, and none
	// starves. Waits are counted in rounds, not seconds, so the order is
	// the same against a fast server and a slow one.
	PolicyTurns Policy = "turns"
	// PolicyLAS serves the agent that has received the least model time
	// so far first (least attained service), ties in arrival order.
	PolicyLAS Policy = "las"
)

// DefaultPolicy is the default of [Config.Policy], chosen from
// `batchagent bench agentic`: against a continuous-batching server with a
// finite KV cache, serving the agents with the most turns done first keeps
// few agents in flight, so their prompt prefixes stay cached, and runs the
// long agents to their end while the short ones fill the slots: the
// lowest mean completion time of the policies and a makespan within 1.1×
// the server's work-conserving bound, where arrival order (with or
// without continuation) and LAS reached 1.25×.
const DefaultPolicy = PolicyTurns

// RateLimit paces model calls to a hosted API's limits. Zero fields mean
// no limit of that kind; limits the backend reports in its answers
// (OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-* headers, on
// 429s too) tighten them, or set them when unset, from the first answer
// on, before any 429; what the backend reports remains of them lowers the
// budget left for the next calls (the account may be shared, or already
// spent). Calls queued before the first answer are paced once the limits
// are known. A 429's Retry-After still pauses admission.
type RateLimit struct {
	// RPM is requests per minute. Defaults to none.
	RPM int
	// TPM is tokens per minute, estimated before each call with CountTokens
	// and corrected with the usage the call reports. Defaults to none.
	TPM int
	// OTPM is output tokens per minute, for a backend that limits them
	// apart (Anthropic): paced by debt, each call's output taken once it
	// is answered, so that the next calls wait for the refill. Defaults to
	// none, unless the backend reports one in its headers; it is not part
	// of the Shared budget.
	OTPM int
	// CountTokens estimates a request's prompt tokens. Defaults to about
	// four bytes a token. It is called only while a token budget is in
	// force (TPM, or one learnt from the backend's headers).
	CountTokens func(*llm.Request) int
	// Shared, if set, returns the budget the backend b shares with other
	// processes (package queue's SharedRate keeps one in Redis): every
	// model call to b also waits on it, so that workers on many processes
	// stay within the account's one limit, not one limit each. RPM and TPM
	// above then pace only this process and may be zero. It is called
	// once per backend, when a job first names it; a nil Shared means none
	// for b, and an error fails the jobs that name b. Defaults to nil:
	// limits are per process.
	Shared func(b Backend) (sched.Shared, error)
}

// Backpressure holds admission back while a self-hosted server's queue is
// long, so the server is fed at capacity instead of flooded. It applies
// when the Model is an llm.QueueProber that declares the probe.
type Backpressure struct {
	// Disabled turns the probe off. Defaults to false.
	Disabled bool
	// MaxQueued pauses admission while the server reports more waiting
	// requests than this. Defaults to DefaultMaxQueued.
	MaxQueued int
	// Interval is how often the server's queue is read. Defaults to
	// DefaultProbeInterval.
	Interval time.Duration
}

// Breaker configures the circuit breaker of each backend (model and model
// name) that jobs with fallbacks use: it opens after Failures agents in a
// row failed on the backend (kinds backend, rate_limit, timeout) or ran
// out of their time budget waiting for it (a slow or dead backend), and
// while it is open those jobs' agents skip the backend for their next
// fallback tier at once, without a call. After Cooldown it half-opens:
// one agent probes the backend, and its success closes the breaker, its
// failure opens it again. Jobs without fallbacks do not use breakers:
// their agents wait out an outage as before (job.Def.OutageBudget).
type Breaker struct {
	// Failures is how many agents in a row must fail on a backend to open
	// its breaker. Defaults to 5.
	Failures int
	// Cooldown is how long a breaker stays open before it half-opens.
	// Defaults to 30s.
	Cooldown time.Duration
	// Disabled turns breakers off: every tier is always tried. Defaults to
	// false.
	Disabled bool
}

// Defaults of [Config].
const (
	DefaultMaxQueued     = sched.DefaultMaxQueued
	DefaultProbeInterval = sched.DefaultProbeInterval
	// DefaultStartWindow is the default of [Config.StartWindow].
	DefaultStartWindow = sched.DefaultStartWindow
	// FirstStartWindow caps the start window until a backend has answered
	// any call of the engine: connections refused from the first call on
	// (a wrong URL) stop the run within about a second.
	FirstStartWindow = sched.FirstWindow
)

// Validate reports the first setting of c that is out of range, or a
// contradiction (NoStartWindow with a StartWindow).
func (c Config) Validate() error {
	switch {
	case c.MaxInflight < 0:
		return fmt.Errorf("negative max inflight %d", c.MaxInflight)
	case c.RateLimit.RPM < 0 || c.RateLimit.TPM < 0:
		return fmt.Errorf("negative rate limit (rpm %d, tpm %d)", c.RateLimit.RPM, c.RateLimit.TPM)
	case c.RateLimit.OTPM < 0:
		return fmt.Errorf("negative output-token rate limit (otpm %d)", c.RateLimit.OTPM)
	case c.Backpressure.MaxQueued < 0 || c.Backpressure.Interval < 0:
		return fmt.Errorf("negative backpressure setting (max queued %d, interval %v)", c.Backpressure.MaxQueued, c.Backpressure.Interval)
	case c.StartWindow < 0:
		return fmt.Errorf("negative start window %v", c.StartWindow)
	case c.Continuation < 0:
		return fmt.Errorf("negative continuation window %v", c.Continuation)
	case c.Policy != "" && c.Policy != PolicyFIFO && c.Policy != PolicyTurns && c.Policy != PolicyLAS:
		return fmt.Errorf("unknown policy %q (known: fifo, turns, las)", c.Policy)
	case c.NoStartWindow && c.StartWindow != 0:
		return fmt.Errorf("no start window contradicts start window %v", c.StartWindow)
	case c.PauseBackoff.Base < 0 || c.PauseBackoff.Max < 0 || c.PauseBackoff.RateLimitBase < 0:
		return fmt.Errorf("negative pause backoff %+v", c.PauseBackoff)
	}
	return nil
}

// Gate is what an engine's admission of one backend runs on: the gate's
// settings, and how the calls through it are counted and ordered.
type Gate struct {
	// Config is the gate's settings, defaults filled.
	Config sched.GateConfig
	// Count estimates a request's prompt tokens (RateLimit.CountTokens);
	// nil for the default.
	Count func(*llm.Request) int
	// Gated is whether every call goes through the gate: when c sets a
	// limit, or when the backend declares its capabilities (a hosted or
	// self-hosted server, not an in-process model: one that declares
	// none, or declares InProcess as the simulator does).
	Gated bool
	// Continuation is c's Continuation window.
	Continuation time.Duration
}

// Gate returns the gate of backend m under model name as c admits its
// calls: the limit adapting from the backend's declared default
// concurrency, slow start and backpressure against a server that reports
// its queue, the start window, and the shared limits of RateLimit.Shared
// and SharedInflight (an error of theirs is returned). c must be valid.
func (c Config) Gate(m llm.Model, name string) (Gate, error) {
	var caps llm.Capabilities
	cp, hosted := m.(llm.Capable)
	if hosted {
		caps = cp.Capabilities()
		hosted = !caps.InProcess
	}
	cfg := sched.GateConfig{
		Fixed:         c.FixedInflight,
		RPM:           c.RateLimit.RPM,
		TPM:           c.RateLimit.TPM,
		OTPM:          c.RateLimit.OTPM,
		Warm:          c.WarmPrefix,
		MaxQueued:     c.Backpressure.MaxQueued,
		ProbeInterval: c.Backpressure.Interval,
		PauseBase:     c.PauseBackoff.Base,
		PauseMax:      c.PauseBackoff.Max,
	}
	if !c.NoStartWindow {
		cfg.StartWindow = cmp.Or(c.StartWindow, DefaultStartWindow)
	}
	policy, err := sched.ParsePolicy(string(cmp.Or(c.Policy, DefaultPolicy)))
	if err != nil {
		return Gate{}, err
	}
	cfg.Policy = policy
	if p, ok := m.(llm.QueueProber); ok && caps.QueueProbe && !c.Backpressure.Disabled {
		cfg.Probe = func(ctx context.Context) (int, error) {
			d, err := p.QueueDepth(ctx)
			return d.Waiting, err
		}
	}
	// The limit and where it adapts from are the gate's defaults: the
	// backend's declared default, and slow start against a probed server.
	cfg.Limit, cfg.Declared, cfg.SlowStart = c.MaxInflight, caps.DefaultConcurrency, cfg.Probe != nil
	if c.RateLimit.Shared != nil {
		sh, err := c.RateLimit.Shared(Backend{Model: m, Name: name})
		if err != nil {
			return Gate{}, fmt.Errorf("batchagent: shared rate limit of backend %q: %w", name, err)
		}
		cfg.Shared = sh
	}
	if c.SharedInflight != nil {
		sl, err := c.SharedInflight(Backend{Model: m, Name: name})
		if err != nil {
			return Gate{}, fmt.Errorf("batchagent: shared inflight limit of backend %q: %w", name, err)
		}
		cfg.SharedSlots = sl
	}
	return Gate{Config: cfg, Count: c.RateLimit.CountTokens, Gated: cfg.Limits() || hosted, Continuation: c.Continuation}, nil
}

// Stats is a snapshot of one backend's admission.
type Stats struct {
	// Backend is the model and model name.
	Backend Backend
	// Inflight counts model calls holding a slot; Waiting those queued.
	Inflight, Waiting int
	// Limit is the current inflight limit; zero means unlimited.
	Limit int
	// LimitHistory is how the adaptive limit changed, from its start.
	LimitHistory []sched.Change
	// Throttles counts model calls the backend rate-limited or refused as
	// overloaded.
	Throttles int64
	// Pauses counts how often backpressure paused admission.
	Pauses int64
	// RateLimits are the request and token budgets in force (configured
	// or learnt from the backend); zero means none.
	RateLimits RateLimit
}

// Validate reports a negative setting of b.
func (b Breaker) Validate() error {
	if b.Failures < 0 || b.Cooldown < 0 {
		return fmt.Errorf("negative breaker settings (failures %d, cooldown %v)", b.Failures, b.Cooldown)
	}
	return nil
}

// Validate reports a Backend that cannot key batchagent.Config.Backends:
// one without a model, or whose model's type is not comparable.
func (b Backend) Validate() error {
	if b.Model == nil {
		return fmt.Errorf("backend %q: no model", b.Name)
	}
	if !reflect.TypeOf(b.Model).Comparable() {
		return fmt.Errorf("backend %q: model of type %T is not comparable", b.Name, b.Model)
	}
	return nil
}

// Total sums the admissions of several backends: their calls in flight
// and waiting, throttles and pauses, and their limits (zero, unlimited,
// when one is). Its Backend is the zero value; its LimitHistory and
// RateLimits are the one backend's when there is exactly one, else none.
func Total(backends []Stats) Stats {
	var t Stats
	unlimited := false
	for _, b := range backends {
		t.Inflight += b.Inflight
		t.Waiting += b.Waiting
		t.Limit += b.Limit
		unlimited = unlimited || b.Limit == 0
		t.Throttles += b.Throttles
		t.Pauses += b.Pauses
	}
	if unlimited {
		t.Limit = 0
	}
	if len(backends) == 1 {
		t.LimitHistory, t.RateLimits = backends[0].LimitHistory, backends[0].RateLimits
	}
	return t
}
