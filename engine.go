package batchagent

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/batchagent/batchagent/tool"
)

// ErrShutdown is the cause of the results of work an engine refused or
// stopped because [Engine.Shutdown] was called: their kind is
// [KindCanceled] and their error wraps it.
var ErrShutdown = errors.New("batchagent: engine shut down")

// Engine runs jobs: many at once, for as long as it lives. It owns what
// jobs share: each backend's admission (one adaptive limit, one rate
// budget, one queue probe and prefix warm-up per backend, with
// [Interactive] work served before [Batch] work), the places for active
// agents, the checkpoint and the counters. It is safe for concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger

	active chan struct{} // a token per active agent of Run and Stream

	gatesMu sync.Mutex
	gates   map[any]*gate // by backendKey; for incomparable models by *Spec

	runners sync.Map // weak.Pointer[Spec] → *runner

	toolsMu      sync.Mutex   // serialises retire and Stats' reading of tools
	retiredTools []tool.Stats // the tool counters of retired runners, by name

	stats counters
	seq   atomic.Int64  // Submit's sequence numbers
	flows atomic.Uint64 // scheduling flows handed out: one per run and per runner

	draining  atomic.Bool   // Drain was called
	drained   chan struct{} // closed by Drain: waits between and before model calls end
	drainOnce sync.Once

	base context.Context    // ended when Shutdown's context ends
	kill context.CancelFunc // ends base

	workMu sync.Mutex     // protects closed and the Add of work
	closed bool           // Shutdown was called: no more work
	work   sync.WaitGroup // runs and handles in progress
}

// New returns an Engine with cfg's settings. The error wraps
// [ErrBadConfig] and says what is wrong. An Engine needs no closing; call
// [Engine.Shutdown] to stop it gracefully.
func New(cfg Config) (*Engine, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		log:     cfg.Logger,
		active:  make(chan struct{}, cfg.MaxActive),
		gates:   map[any]*gate{},
		drained: make(chan struct{}),
	}
	e.base, e.kill = context.WithCancel(context.Background())
	return e, nil
}

// Drain starts a graceful stop: no more inputs are admitted and agents stop
// before their next turn, so the turns in flight finish (and are
// checkpointed) and the runs in progress end with what finished; stopped
// agents report KindCanceled. Cancel the run's context to stop at once.
// Drain is permanent for the Engine and safe to call concurrently. Agents
// waiting to retry a model call, or in a pause of admission (a backend's
// Retry-After, an outage), stop at once. [Engine.Shutdown] drains and then
// waits.
func (e *Engine) Drain() {
	e.draining.Store(true)
	e.drainOnce.Do(func() { close(e.drained) })
}

// Shutdown stops the engine gracefully: it drains (see [Engine.Drain]),
// so no more work is admitted and the turns in flight finish and are
// checkpointed, and waits until every run and handle has ended. If ctx
// ends first, it cancels what is left and waits for that. Every Handle
// ends with a result; later calls of Run, Stream and Submit give
// [KindCanceled] results whose error wraps [ErrShutdown]. It returns
// ctx's error when ctx ended before the work did, else nil.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.workMu.Lock()
	e.closed = true
	e.workMu.Unlock()
	e.Drain()
	done := make(chan struct{})
	go func() { // owned here: it ends when the work does, which it waits for
		e.work.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		e.kill()
		<-done
		return ctx.Err()
	}
}

// begin registers work for Shutdown; false once the engine is shut down.
func (e *Engine) begin() bool {
	e.workMu.Lock()
	defer e.workMu.Unlock()
	if e.closed {
		return false
	}
	e.work.Add(1)
	return true
}

// bind returns ctx, also cancelled when Shutdown gives up waiting.
func (e *Engine) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// Run is the package-level [Run] on spec: it runs one agent per input and
// returns the results in input order, one per input. If ctx is cancelled,
// or the engine shuts down, agents in flight stop, finished results are
// kept and every other input gets a result of kind [KindCanceled]. The
// error is non-nil only for a nil spec.
func (e *Engine) Run(ctx context.Context, spec *Spec, inputs Inputs) ([]Result, error) {
	seq, err := e.stream(ctx, spec, inputs, true)
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
	return e.stream(ctx, spec, inputs, false)
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
