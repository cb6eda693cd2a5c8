package batchagent

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// DefaultMaxActive is the default of [Config.MaxActive].
const DefaultMaxActive = 1024

// Config holds an [Engine]'s settings: what every job run on it shares. The
// zero value is usable: an engine with the defaults, no checkpoint and no
// logger. What to run is a [Spec], given to each call.
type Config struct {
	// MaxActive caps the agents alive at once across the engine's runs
	// (Run and Stream), and so memory: results wait in a buffer of this
	// size when a consumer is slow. Runs in progress take turns for the
	// places, so two runs started together share them equally. Agents of
	// Submit are not counted: the caller holds each one's Handle.
	// Defaults to DefaultMaxActive.
	MaxActive int
	// Admission is the admission of model calls to each backend, for the
	// backends Backends does not name. Every job whose Spec has the same
	// Model and model name shares one admission: one adaptive limit, one
	// rate budget, one queue probe, one prefix warm-up. Defaults to
	// Admission's zero value.
	Admission Admission
	// Backends sets the admission of particular backends. Defaults to
	// none.
	Backends map[Backend]Admission
	// Checkpoint, if set, saves every completed turn and final result, and
	// a run resumes from what it holds: finished inputs are not run again
	// (their saved results are delivered), unfinished agents continue from
	// their last completed turn. States are saved under the Spec's ID.
	// Defaults to nil: no checkpointing.
	Checkpoint Checkpointer
	// RetryFailed, with Checkpoint, runs inputs whose saved result is a
	// failure again. Defaults to false.
	RetryFailed bool
	// StopOnCheckpointError, with Checkpoint, makes a failed save fatal:
	// the engine drains (see [Engine.Drain]: no more inputs are admitted,
	// agents stop after their turn in flight), and an agent whose final
	// state could not be saved yields, instead of its outcome, a result of
	// kind [KindCanceled] whose error wraps [ErrCheckpoint]; so every
	// result delivered as done or failed is one a resumed run finds.
	// Stats.CheckpointErrors counts the failed saves. Defaults to false: a
	// failed save is logged and counted, and the result delivered all the
	// same.
	StopOnCheckpointError bool
	// OnResult, if set, is called once per result of Run and Stream, in
	// completion order within each run, serially within a run, before the
	// result is returned or yielded. It runs outside the agents: a slow
	// callback delays delivery, not the agents, until MaxActive results
	// are waiting. Results of Submit are not passed to it: the Handle has
	// them. Defaults to none.
	OnResult OnResultFunc
	// Logger receives lifecycle events and warnings. Defaults to none:
	// silent.
	Logger *slog.Logger
	// Breaker configures the circuit breaker of each backend that jobs
	// with fallbacks (job.Def.Fallbacks) use. Defaults to Breaker's
	// defaults.
	Breaker Breaker
}

// Backend names a backend for [Config.Backends]: the llm.Model value and
// the model name a Spec sends to it. Model must be comparable (every
// backend of this module is a pointer); a Spec whose Model is not gets an
// admission of its own.
type Backend struct {
	Model llm.Model
	Name  string
}

// Admission configures how model calls to one backend are admitted:
// concurrency, rate, backpressure and prefix warming. The zero value
// adapts the concurrency from the backend's declared default and applies
// no rate limit.
type Admission struct {
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
	// declares the backend unavailable ([ErrBackendUnavailable]). Defaults
	// to DefaultStartWindow; NoStartWindow turns the check off. Until the
	// backend has answered any call of the engine, the window is at most
	// FirstStartWindow (1s): a wrong URL fails fast.
	StartWindow time.Duration
	// NoStartWindow turns the unavailability check off: StartWindow must
	// then be zero.
	NoStartWindow bool
	// PauseBackoff spaces the pauses of admission after connection
	// failures (each twice the last, capped by Max and by 5s). Defaults to
	// Backoff's defaults.
	PauseBackoff Backoff
}

// Policy names an order of the model calls that wait for a backend's
// slots (see [Admission.Policy]).
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

// DefaultPolicy is the default of [Admission.Policy], chosen from
// `batchagent bench agentic`: against a continuous-batching server with a
// finite KV cache, serving the agents with the most turns done first keeps
// few agents in flight, so their prompt prefixes stay cached, and runs the
// long agents to their end while the short ones fill the slots: the
// lowest mean completion time of the policies and a makespan within 1.1×
// the server's work-conserving bound, where arrival order (with or
// without continuation) and LAS reached 1.25×.
const DefaultPolicy = PolicyTurns

// schedPolicy returns the sched.Policy of p ("" is DefaultPolicy).
func schedPolicy(p Policy) (sched.Policy, error) {
	if p == "" {
		p = DefaultPolicy
	}
	return sched.ParsePolicy(string(p))
}

// RateLimit paces model calls to a hosted API's limits. Zero fields mean
// no limit of that kind; limits the backend reports in its responses
// (x-ratelimit-* headers) tighten them, or set them when unset.
type RateLimit struct {
	// RPM is requests per minute. Defaults to none.
	RPM int
	// TPM is tokens per minute, estimated before each call with CountTokens
	// and corrected with the usage the call reports. Defaults to none.
	TPM int
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

// OnResultFunc receives each result as it completes.
type OnResultFunc func(Result)

// ErrBadConfig is wrapped by the error [New] returns for an invalid
// [Config].
var ErrBadConfig = errors.New("batchagent: bad config")

// validate checks c and returns it with its defaults filled.
func (c Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...)
	}
	if c.MaxActive < 0 {
		return bad("negative max active %d", c.MaxActive)
	}
	if c.MaxActive == 0 {
		c.MaxActive = DefaultMaxActive
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RetryFailed && c.Checkpoint == nil {
		return bad("retry failed needs a checkpoint")
	}
	if c.StopOnCheckpointError && c.Checkpoint == nil {
		return bad("stop on checkpoint error needs a checkpoint")
	}
	if err := c.Admission.validate(); err != nil {
		return bad("admission: %v", err)
	}
	if c.Breaker.Failures < 0 || c.Breaker.Cooldown < 0 {
		return bad("negative breaker settings (failures %d, cooldown %v)", c.Breaker.Failures, c.Breaker.Cooldown)
	}
	backends := make(map[Backend]Admission, len(c.Backends))
	for b, a := range c.Backends {
		if b.Model == nil {
			return bad("backend %q: no model", b.Name)
		}
		if !reflect.TypeOf(b.Model).Comparable() {
			return bad("backend %q: model of type %T is not comparable", b.Name, b.Model)
		}
		if err := a.validate(); err != nil {
			return bad("backend %q: admission: %v", b.Name, err)
		}
		backends[b] = a
	}
	c.Backends = backends
	return c, nil
}

func (a Admission) validate() error {
	switch {
	case a.MaxInflight < 0:
		return fmt.Errorf("negative max inflight %d", a.MaxInflight)
	case a.RateLimit.RPM < 0 || a.RateLimit.TPM < 0:
		return fmt.Errorf("negative rate limit (rpm %d, tpm %d)", a.RateLimit.RPM, a.RateLimit.TPM)
	case a.Backpressure.MaxQueued < 0 || a.Backpressure.Interval < 0:
		return fmt.Errorf("negative backpressure setting (max queued %d, interval %v)", a.Backpressure.MaxQueued, a.Backpressure.Interval)
	case a.StartWindow < 0:
		return fmt.Errorf("negative start window %v", a.StartWindow)
	case a.Continuation < 0:
		return fmt.Errorf("negative continuation window %v", a.Continuation)
	case a.Policy != "" && a.Policy != PolicyFIFO && a.Policy != PolicyTurns && a.Policy != PolicyLAS:
		return fmt.Errorf("unknown policy %q (known: fifo, turns, las)", a.Policy)
	case a.NoStartWindow && a.StartWindow != 0:
		return fmt.Errorf("no start window contradicts start window %v", a.StartWindow)
	case a.PauseBackoff.Base < 0 || a.PauseBackoff.Max < 0 || a.PauseBackoff.RateLimitBase < 0:
		return fmt.Errorf("negative pause backoff %+v", a.PauseBackoff)
	}
	return nil
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
