// Package engine is the loop behind batchagent.Engine: it runs the agents
// of many jobs at once on shared admission, checkpoints them and counts
// their work. The root package holds the public nouns and turns its Config
// into Options; everything here is reached only through it.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
	"github.com/batchagent/batchagent/tool"
)

// ErrShutdown is the cause of the results of work an engine refused or
// stopped because Shutdown was called.
var ErrShutdown = errors.New("batchagent: engine shut down")

// Options configures an Engine. The root package fills every field.
type Options struct {
	// MaxActive caps the agents alive at once across runs (not Submits).
	MaxActive int
	// Checkpoint saves turns and results; nil: none.
	Checkpoint Checkpointer
	// RetryFailed runs saved failures again.
	RetryFailed bool
	// StopOnCheckpointError drains the engine on a failed save.
	StopOnCheckpointError bool
	// OnResult is called once per result of a run, before delivery.
	OnResult func(job.Result)
	// Logger receives lifecycle events; never nil.
	Logger *slog.Logger
	// Admission returns the admission of the backend m serves under name:
	// called once per backend, when a spec first names it.
	Admission func(m llm.Model, name string) (Admission, error)
	// Breaker configures the circuit breakers of backends of jobs with
	// fallbacks.
	Breaker Breaker
}

// Admission is one backend's admission, as the root's policy sets it.
type Admission struct {
	// Gate configures the backend's sched.Gate; the engine sets its Stop
	// and Logger.
	Gate sched.GateConfig
	// Count estimates a request's prompt tokens while a token budget is in
	// force. Defaults to about four bytes a token.
	Count func(*llm.Request) int
	// Gated says whether every model call goes through the gate (a backend
	// with capabilities or any limit); otherwise calls go straight to the
	// model.
	Gated bool
	// Continuation is the window of cache-aware continuation: an agent
	// whose previous model call ended at most this long ago waits for a
	// slot as continuing (sched.Order.Continuing). Zero means off.
	Continuation time.Duration
}

// Engine runs jobs: many at once, for as long as it lives. It is safe for
// concurrent use.
type Engine struct {
	opt Options
	log *slog.Logger

	active chan struct{} // a token per active agent of Stream

	gatesMu sync.Mutex
	gates   map[any]*gate // by backendKey; for incomparable models by *Spec
	order   []*gate       // in order of creation

	runners sync.Map // weak.Pointer[job.Spec] → *runner

	toolsMu      sync.Mutex   // serialises retire and Tools
	retiredTools []tool.Stats // the tool counters of retired runners, by name

	stats          counters
	breakerChanges atomic.Int64  // state changes of the backends' circuit breakers
	breakers       sync.Map      // backendKey → *gobreaker.TwoStepCircuitBreaker
	seq            atomic.Int64  // Submit's sequence numbers
	flows          atomic.Uint64 // scheduling flows handed out: one per run and per runner

	callFlowsOnce sync.Once
	callFlows     [2]uint64 // the flow of Call's requests, by class

	draining  atomic.Bool   // Drain was called
	drained   chan struct{} // closed by Drain: waits between and before model calls end
	drainOnce sync.Once

	base context.Context    // ended when Shutdown's context ends
	kill context.CancelFunc // ends base

	workMu sync.Mutex     // protects closed and the Add of work
	closed bool           // Shutdown was called: no more work
	work   sync.WaitGroup // runs and handles in progress
}

// New returns an Engine with opt, whose fields the caller validated.
func New(opt Options) *Engine {
	e := &Engine{
		opt:     opt,
		log:     opt.Logger,
		active:  make(chan struct{}, opt.MaxActive),
		gates:   map[any]*gate{},
		drained: make(chan struct{}),
	}
	e.base, e.kill = context.WithCancel(context.Background())
	return e
}

// Drain starts a graceful stop; see batchagent.Engine.Drain.
func (e *Engine) Drain() {
	e.draining.Store(true)
	e.drainOnce.Do(func() { close(e.drained) })
}

// Shutdown drains, waits for every run and handle, and cancels what is
// left when ctx ends; see batchagent.Engine.Shutdown.
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
