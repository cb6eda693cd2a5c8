package batchagent

import (
	"context"
	"iter"

	"github.com/batchagent/batchagent/internal/engine"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// ErrShutdown is the cause of the results of work an engine refused or
// stopped because [Engine.Shutdown] was called: their kind is
// [KindCanceled] and their error wraps it.
var ErrShutdown = engine.ErrShutdown

// Engine runs jobs: many at once, for as long as it lives. It owns what
// jobs share: each backend's admission (one adaptive limit, one rate
// budget, one queue probe and prefix warm-up per backend, with
// [Interactive] work served before [Batch] work), the places for active
// agents, the checkpoint and the counters. It is safe for concurrent use.
type Engine struct {
	core  *engine.Engine
	cache CacheCounter // cfg.ResponseCache; nil: none
}

// New returns an Engine with cfg's settings. The error wraps
// [ErrBadConfig] and says what is wrong. An Engine needs no closing; call
// [Engine.Shutdown] to stop it gracefully.
func New(cfg Config) (*Engine, error) {
	core, err := engine.New(engine.Options{
		MaxActive:             cfg.MaxActive,
		Checkpoint:            cfg.Checkpoint,
		RetryFailed:           cfg.RetryFailed,
		StopOnCheckpointError: cfg.StopOnCheckpointError,
		OnResult:              cfg.OnResult,
		Logger:                cfg.Logger,
		Admission:             cfg.Admission,
		Backends:              cfg.Backends,
		Breaker:               cfg.Breaker,
	})
	if err != nil {
		return nil, err
	}
	return &Engine{core: core, cache: cfg.ResponseCache}, nil
}

// Drain starts a graceful stop: no more inputs are admitted and agents stop
// before their next turn, so the turns in flight finish (and are
// checkpointed) and the runs in progress end with what finished; stopped
// agents report KindCanceled. Cancel the run's context to stop at once.
// Drain is permanent for the Engine and safe to call concurrently. Agents
// waiting to retry a model call, or in a pause of admission (a backend's
// Retry-After, an outage), stop at once. [Engine.Shutdown] drains and then
// waits.
func (e *Engine) Drain() { e.core.Drain() }

// Shutdown stops the engine gracefully: it drains (see [Engine.Drain]),
// so no more work is admitted and the turns in flight finish and are
// checkpointed, and waits until every run and handle has ended. If ctx
// ends first, it cancels what is left and waits for that. Every Handle
// ends with a result; later calls of Run, Stream and Submit give
// [KindCanceled] results whose error wraps [ErrShutdown]. It returns
// ctx's error when ctx ended before the work did, else nil.
func (e *Engine) Shutdown(ctx context.Context) error { return e.core.Shutdown(ctx) }

// Run is the package-level [Run] on spec: it runs one agent per input and
// returns the results in input order, one per input. If ctx is cancelled,
// or the engine shuts down, agents in flight stop, finished results are
// kept and every other input gets a result of kind [KindCanceled]. The
// error is non-nil only for a nil spec.
func (e *Engine) Run(ctx context.Context, spec *Spec, inputs Inputs) ([]Result, error) {
	seq, err := e.core.Stream(ctx, spec, inputs, true)
	if err != nil {
		return nil, err
	}
	var results []Result
	for r := range seq {
		for len(results) <= r.Index {
			results = append(results, Result{})
		}
		results[r.Index] = r
	}
	return results, nil
}

// Stream is the package-level [Stream] on spec: it runs one agent per
// input and yields results in completion order. Memory stays bounded by
// [Config.MaxActive] for any number of inputs. Breaking out of the loop
// cancels the agents still running and waits for them. If ctx is
// cancelled, or the engine shuts down, agents in flight stop and yield
// results of kind [KindCanceled]; inputs not yet started yield nothing.
// The error is non-nil only for a nil spec.
func (e *Engine) Stream(ctx context.Context, spec *Spec, inputs Inputs) (iter.Seq[Result], error) {
	return e.core.Stream(ctx, spec, inputs, false)
}

// Run runs spec over inputs on a new engine with the default [Config],
// and returns the results in input order; see [Engine.Run].
func Run(ctx context.Context, spec *Spec, inputs Inputs) ([]Result, error) {
	e, _ := New(Config{}) // the zero Config is valid
	return e.Run(ctx, spec, inputs)
}

// Stream runs spec over inputs on a new engine with the default [Config],
// and yields results as they complete; see [Engine.Stream].
func Stream(ctx context.Context, spec *Spec, inputs Inputs) (iter.Seq[Result], error) {
	e, _ := New(Config{}) // the zero Config is valid
	return e.Stream(ctx, spec, inputs)
}

// Call sends one model request to backend b through b's admission in
// class, without an agent loop, and yields the answer's events as they
// come: streamed when b.Model is an llm.Streamer, else built from its
// whole response (text, each tool call, usage, end). It is the gateway's
// passthrough: the adaptive limit, rate budgets, backpressure and the
// priority class apply as to agents' calls. req.Model defaults to b.Name.
// A failure ends the sequence with its error; nothing is retried.
// Stopping the iteration abandons the call and frees its slot. After
// Shutdown the sequence yields [ErrShutdown]. opts may be nil: the
// defaults.
func (e *Engine) Call(ctx context.Context, b Backend, class Priority, req *llm.Request, opts *CallOptions) iter.Seq2[llm.Event, error] {
	var onAdmit func()
	if opts != nil {
		onAdmit = opts.OnAdmit
	}
	return e.core.Call(ctx, b.Model, b.Name, sched.Class(class), req, onAdmit)
}

// CallOptions are the per-call settings of [Engine.Call]. The zero value
// (or a nil pointer) is the defaults.
type CallOptions struct {
	// OnAdmit, if set, is called once the call is admitted (it holds one
	// of the backend's slots, or the backend has no admission) and before
	// its request is sent: from then on the backend works on it, though
	// its first event may be long in coming (a long prompt's prefill). It
	// is not called for a call that ends before admission (a failure, a
	// cancellation, the iteration stopped). It runs on the goroutine
	// iterating the sequence and should return quickly, as the request
	// waits for it; a panic in it goes on up to that goroutine, the slot
	// freed. Defaults to nil: none.
	OnAdmit func()
}
