// Package engine is the loop behind batchagent.Engine: it runs the agents
// of many jobs at once on shared admission, checkpoints them and counts
// their work. The root package holds the public nouns and turns its Config
// into Options; everything here is reached only through it.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/batchagent/batchagent/admission"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// ErrShutdown is the cause of the results of work an engine refused or
// stopped because Shutdown was called.
var ErrShutdown = errors.New("batchagent: engine shut down")

// Options configures an Engine: batchagent.Config, which [New] checks
// and completes with its defaults.
type Options struct {
	// MaxActive caps the agents alive at once across runs (not Submits).
	// Defaults to DefaultMaxActive.
	MaxActive int
	// Checkpoint saves turns and results; nil: none.
	Checkpoint Checkpointer
	// RetryFailed runs saved failures again.
	RetryFailed bool
	// StopOnCheckpointError drains the engine on a failed save.
	StopOnCheckpointError bool
	// OnResult is called once per result of a run, before delivery.
	OnResult func(job.Result)
	// Logger receives lifecycle events. Defaults to one that discards.
	Logger *slog.Logger
	// Admission is the admission of the backends Backends does not name.
	Admission admission.Config
	// Backends sets the admission of particular backends.
	Backends map[admission.Backend]admission.Config
	// Breaker configures the circuit breakers of backends of jobs with
	// fallbacks.
	Breaker admission.Breaker
}

// DefaultMaxActive is the default of Options.MaxActive.
const DefaultMaxActive = 1024

// ErrBadConfig is wrapped by the error New returns for invalid Options.
var ErrBadConfig = errors.New("batchagent: bad config")

// check returns opt with its defaults filled, or what is wrong with it.
func (opt Options) check() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return opt, fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...)
	}
	switch {
	case opt.MaxActive < 0:
		return bad("negative max active %d", opt.MaxActive)
	case opt.RetryFailed && opt.Checkpoint == nil:
		return bad("retry failed needs a checkpoint")
	case opt.StopOnCheckpointError && opt.Checkpoint == nil:
		return bad("stop on checkpoint error needs a checkpoint")
	}
	opt.MaxActive = cmp.Or(opt.MaxActive, DefaultMaxActive)
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if err := opt.Admission.Validate(); err != nil {
		return bad("admission: %v", err)
	}
	if err := opt.Breaker.Validate(); err != nil {
		return bad("%v", err)
	}
	backends := make(map[admission.Backend]admission.Config, len(opt.Backends))
	for b, a := range opt.Backends {
		if err := b.Validate(); err != nil {
			return bad("%v", err)
		}
		if err := a.Validate(); err != nil {
			return bad("backend %q: admission: %v", b.Name, err)
		}
		backends[b] = a
	}
	opt.Backends = backends
	return opt, nil
}

// admissionOf returns the admission of the backend m serves under name:
// that of Backends, or the default one.
func (opt *Options) admissionOf(m llm.Model, name string) (admission.Gate, error) {
	a := opt.Admission
	if reflect.TypeOf(m).Comparable() {
		if b, ok := opt.Backends[admission.Backend{Model: m, Name: name}]; ok {
			a = b
		}
	}
	return a.Gate(m, name)
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
	gauges         agent.Gauges  // the agents by what they do now, shared by every runner
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

// New returns an Engine with opt, or an error wrapping ErrBadConfig that
// says what is wrong with opt.
func New(opt Options) (*Engine, error) {
	opt, err := opt.check()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		opt:     opt,
		log:     opt.Logger,
		active:  make(chan struct{}, opt.MaxActive),
		gates:   map[any]*gate{},
		drained: make(chan struct{}),
	}
	e.base, e.kill = context.WithCancel(context.Background())
	return e, nil
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
