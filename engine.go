package batchagent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// Engine runs a [Job]. It owns the job's shared parts: the tool pool (its
// cache persists across runs), the inference slots and the counters. It is
// safe for concurrent use; concurrent runs share slots and tools.
type Engine struct {
	job    Job
	tmpl   *job.Template
	runner *agent.Runner
	pool   *tool.Pool
	adm    *admission
	gated  bool // adm is consulted for every model call
	probe  llm.QueueProber
	log    *slog.Logger

	stats     counters
	draining  atomic.Bool   // Drain was called
	drained   chan struct{} // closed by Drain: waits between and before model calls end
	drainOnce sync.Once
}

// Drain starts a graceful stop: no more inputs are admitted and agents stop
// before their next turn, so the turns in flight finish (and are
// checkpointed) and the runs in progress end with what finished; stopped
// agents report KindCanceled. Cancel the run's context to stop at once.
// Drain is permanent for the Engine and safe to call concurrently. Agents
// waiting to retry a model call, or in a pause of admission (a backend's
// Retry-After, an outage), stop at once.
func (e *Engine) Drain() {
	e.draining.Store(true)
	e.drainOnce.Do(func() { close(e.drained) })
}

// New validates job and returns an Engine for it. The error wraps
// [ErrBadJob] and says what is wrong.
func New(j Job) (*Engine, error) {
	if j.ID == "" {
		j.ID = "job"
	}
	if j.Model == nil {
		return nil, badJob("no model")
	}
	if j.Task == "" {
		return nil, badJob("empty task template")
	}
	if j.MaxTurns < 0 || j.MaxInflight < 0 || j.MaxActive < 0 || j.Timeout < 0 || j.MaxTokens < 0 {
		return nil, badJob("negative limit (max turns %d, max inflight %d, max active %d, timeout %v, max tokens %d)",
			j.MaxTurns, j.MaxInflight, j.MaxActive, j.Timeout, j.MaxTokens)
	}
	if t := j.Temperature; t != nil && !(*t >= 0 && *t <= math.MaxFloat64) {
		return nil, badJob("temperature %v: want a finite number from 0 up", *t)
	}
	if p := j.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		return nil, badJob("top_p %v: want a number from 0 to 1", *p)
	}
	if j.MaxTokensLimit < 0 {
		return nil, badJob("negative max tokens limit %d", j.MaxTokensLimit)
	}
	if j.MaxTokens == 0 {
		j.MaxTokens = DefaultMaxTokens
	}
	if j.MaxTokensLimit > 0 && j.MaxTokensLimit < j.MaxTokens {
		// It would be raised to MaxTokens silently.
		return nil, badJob("max tokens limit %d is below max tokens %d (the default when unset)", j.MaxTokensLimit, j.MaxTokens)
	}
	if j.MaxActive == 0 {
		j.MaxActive = DefaultMaxActive
	}
	tmpl, err := job.ParseTemplate(j.Task)
	if err != nil {
		return nil, badJob("task: %v", err)
	}
	e := &Engine{job: j, tmpl: tmpl, log: j.Logger, drained: make(chan struct{})}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	var sch *schema.Schema
	if len(j.OutputSchema) > 0 {
		if sch, err = schema.Compile(j.OutputSchema); err != nil {
			return nil, badJob("output schema: %v", err)
		}
	}
	if len(j.Tools) > 0 {
		if e.pool, err = tool.NewPool(j.Tools, j.ToolPool); err != nil {
			return nil, badJob("tools: %v", err)
		}
	}
	if j.RateLimit.RPM < 0 || j.RateLimit.TPM < 0 || j.Backpressure.MaxQueued < 0 || j.Backpressure.Interval < 0 {
		return nil, badJob("negative rate limit or backpressure setting")
	}
	caps, hosted := capabilities(j.Model)
	if p, ok := j.Model.(llm.QueueProber); ok && caps.QueueProbe && !j.Backpressure.Disabled {
		e.probe = p
		if e.job.Backpressure.MaxQueued == 0 {
			e.job.Backpressure.MaxQueued = DefaultMaxQueued
		}
		if e.job.Backpressure.Interval == 0 {
			e.job.Backpressure.Interval = DefaultProbeInterval
		}
	}
	if e.adm, err = newAdmission(j, caps.DefaultConcurrency, e.probe != nil, e.log); err != nil {
		return nil, badJob("%v", err)
	}
	e.adm.stop = e.drained
	e.gated = e.adm.slots.Limit() > 0 || j.RateLimit.RPM > 0 || j.RateLimit.TPM > 0 || j.WarmPrefix || e.probe != nil || hosted
	cfg := agent.Config{
		Model:      j.Model,
		ModelName:  j.ModelName,
		System:     j.System,
		Tools:      e.pool,
		Schema:     sch,
		Check:      j.Check,
		MaxTurns:   j.MaxTurns,
		MaxRetries: j.MaxRetries,
		MaxTokens:  j.MaxTokens,
		Backoff:    retry.Policy{Base: j.Backoff.Base, RateLimitBase: j.Backoff.RateLimitBase, Max: j.Backoff.Max},

		Temperature:   j.Temperature,
		TopP:          j.TopP,
		Seed:          j.Seed,
		StopSequences: j.Stop,
		OutageBudget:  j.OutageBudget,
	}
	cfg.MaxTokensLimit = j.MaxTokensLimit
	if e.gated {
		cfg.Gate = e.adm
	}
	cfg.Stop, cfg.Stopped = e.draining.Load, e.drained
	if j.Checkpoint != nil {
		cfg.OnTurn = func(ctx context.Context, st *agent.State) {
			if st.Output == nil { // the final turn is saved with the agent's result
				_ = e.save(ctx, st) // counted and logged; under StopOnCheckpointError it drains
			}
		}
	}
	if e.runner, err = agent.New(cfg); err != nil {
		return nil, badJob("%v", err)
	}
	return e, nil
}

// Run runs one agent per input and returns the results in input order, one
// per input. If ctx is cancelled, agents in flight stop, finished results
// are kept and every other input gets a result of kind [KindCanceled]. The
// error is non-nil only for a bad job.
func Run(ctx context.Context, j Job, inputs Inputs) ([]Result, error) {
	e, err := New(j)
	if err != nil {
		return nil, err
	}
	return e.Run(ctx, inputs), nil
}

// Stream runs one agent per input and yields results in completion order.
// Memory stays bounded by [Job.MaxActive] for any number of inputs.
// Breaking out of the loop cancels the agents still running and waits for
// them. If ctx is cancelled, agents in flight stop and yield results of
// kind [KindCanceled]; inputs not yet started yield nothing. The error is
// non-nil only for a bad job.
func Stream(ctx context.Context, j Job, inputs Inputs) (iter.Seq[Result], error) {
	e, err := New(j)
	if err != nil {
		return nil, err
	}
	return e.Stream(ctx, inputs), nil
}

// Run is like the package-level [Run] on the engine's job.
func (e *Engine) Run(ctx context.Context, inputs Inputs) []Result {
	var results []Result
	for r := range e.stream(ctx, inputs, true) {
		for len(results) <= r.Index {
			results = append(results, Result{})
		}
		results[r.Index] = r
	}
	return results
}

// Stream is like the package-level [Stream] on the engine's job.
func (e *Engine) Stream(ctx context.Context, inputs Inputs) iter.Seq[Result] {
	return e.stream(ctx, inputs, false)
}

// stream runs inputs and yields results as they complete. With
// cancelRest, inputs not started before ctx ends still yield a canceled
// result each, so that every input has one.
func (e *Engine) stream(ctx context.Context, inputs Inputs, cancelRest bool) iter.Seq[Result] {
	return func(yield func(Result) bool) {
		ctx, unavailable := context.WithCancelCause(ctx)
		defer unavailable(nil)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		run := e.adm.out.begin()
		defer e.adm.out.end(run)
		wg.Go(func() { e.stopIfUnavailable(ctx, run, unavailable) })
		if e.probe != nil {
			wg.Go(func() { e.adm.probe(ctx, e.probe, e.job.Backpressure) })
		}
		// Every result holds one of MaxActive tokens from admission until it
		// has been delivered, so out never blocks a sender.
		out := make(chan outcome, e.job.MaxActive)
		tokens := make(chan struct{}, e.job.MaxActive)
		wg.Go(func() {
			defer cancel() // stops the probe once every agent is done
			e.admit(ctx, run, inputs, cancelRest, tokens, out)
			close(out)
		})
		stopped := false
		for o := range out {
			if !stopped {
				e.deliver(o)
				if !yield(o.Result) {
					stopped = true
					cancel()
				}
			}
			<-tokens
		}
		wg.Wait()
	}
}

// stopIfUnavailable ends the run, with the unavailability error as its
// context's cause, once the run declared the backend unavailable; or
// returns when ctx ends.
func (e *Engine) stopIfUnavailable(ctx context.Context, run *outageRun, stop context.CancelCauseFunc) {
	select {
	case <-run.down:
		err := e.adm.out.unavailable(run)
		e.log.LogAttrs(ctx, slog.LevelError, "backend unavailable: stopping the run; unfinished inputs stay pending",
			slog.String("job", e.job.ID), slog.Any("err", err))
		stop(err)
	case <-ctx.Done():
	}
}

// admit reads inputs and starts one agent per input, at most MaxActive at
// a time. It returns when every started agent has sent its result.
func (e *Engine) admit(ctx context.Context, run *outageRun, inputs Inputs, cancelRest bool, tokens chan struct{}, out chan<- outcome) {
	var agents sync.WaitGroup
	defer agents.Wait()
	// Without the checkpoint the run would redo or duplicate work: every
	// input fails with the load's error instead.
	saved, loadErr := e.loadCheckpoint(ctx)
	index := 0
	for in, err := range inputs {
		i := index
		index++
		// Stream: inputs not started when the run stops yield nothing.
		stopped := func() bool { return !cancelRest && (ctx.Err() != nil || e.draining.Load()) }
		if stopped() {
			return
		}
		select {
		case tokens <- struct{}{}:
			if stopped() { // ctx ended as the token came
				<-tokens
				return
			}
		case <-ctx.Done():
			if !cancelRest {
				return
			}
			// Wait for room without starting the agent: the canceled
			// result still needs a token.
			tokens <- struct{}{}
		}
		e.stats.started.Add(1)
		if err != nil {
			out <- outcome{Result: e.fail(i, nil, -1, "input", err, KindInput, time.Now())}
			continue
		}
		if loadErr != nil {
			out <- outcome{Result: e.fail(i, in, -1, "checkpoint", fmt.Errorf("load checkpoint: %w", loadErr), KindBackend, time.Now())}
			continue
		}
		prev, hasPrev := saved[i]
		delete(saved, i) // what it holds is freed as the run moves on
		if hasPrev && !prev.Input.Same(in) {
			// The state of another input at this index: run this one fresh.
			hasPrev = false
			e.log.LogAttrs(ctx, slog.LevelWarn, "saved state is of a different input: running the input again",
				slog.String("job", e.job.ID), slog.Int("agent", i))
		}
		if hasPrev && e.finished(prev) {
			out <- outcome{Result: StateResult(e.job.ID, prev), prior: workOf(&prev), restored: true}
			continue
		}
		if ctx.Err() != nil || e.draining.Load() {
			out <- outcome{Result: e.fail(i, in, -1, "generate", errors.Join(context.Canceled, context.Cause(ctx)), KindCanceled, time.Now())}
			continue
		}
		var resume *agent.State
		if hasPrev && prev.Status == agent.StatusRunning && len(prev.Messages) > 0 {
			resume = &prev
		}
		prior := workOf(resume)
		agents.Add(1)
		go e.runAgent(ctx, run, i, in, resume, func(r Result) {
			out <- outcome{Result: r, prior: prior}
			agents.Done()
		})
	}
}

// runAgent runs the agent of input i to completion, from resume when a
// checkpoint holds its last completed turn, and hands its result to
// deliver once it is checkpointed.
func (e *Engine) runAgent(ctx context.Context, run *outageRun, i int, in Input, resume *agent.State, deliver func(Result)) {
	start := time.Now()
	st := resume
	if st == nil {
		task, err := e.tmpl.Render(in)
		if err != nil {
			r := e.fail(i, in, -1, "render", err, KindTemplate, start)
			e.finish(ctx, &agent.State{JobID: e.job.ID, Index: i, Input: in}, r, deliver)
			return
		}
		st = &agent.State{JobID: e.job.ID, Index: i, Input: in, Status: agent.StatusRunning,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: task}}}
	}
	actx := ctx
	if e.job.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeoutCause(ctx, e.job.Timeout, errAgentTimeout)
		defer cancel()
	}
	err := e.runner.Run(actx, st)
	r := resultOf(i, in, st)
	r.Timings.Total = time.Since(start)
	if err != nil {
		ae := &AgentError{JobID: e.job.ID, Agent: i, Turn: -1, Op: "generate", Err: err}
		if se, ok := errors.AsType[*agent.Error](err); ok {
			ae.Turn, ae.Op, ae.Err = se.Turn, se.Op, se.Err
		}
		timedOut := errors.Is(context.Cause(actx), errAgentTimeout)
		canceled := ctx.Err() != nil || errors.Is(err, agent.ErrStopped)
		// The gate sees every call: it knows whether any was answered.
		// Ungated, no call is observed and the backend is never declared down.
		var down error
		if e.gated {
			down = e.adm.out.gaveUp(run, ae.Err)
		}
		if down != nil {
			// Stopped by the unavailable backend, whichever error it
			// saw first: no answer came, so it stays pending.
			ae.Err, canceled, timedOut = down, true, false
		}
		ae.Kind = classify(ae.Err, timedOut, canceled)
		r.Err, r.Output, r.Raw = ae, nil, st.Raw
	}
	e.finish(ctx, st, r, deliver)
}

// resultOf returns the result of agent i, whose input is in, from its
// state: output, counters, usage and timings (Total as saved with a final
// state; the engine sets it for the agents it runs).
func resultOf(i int, in Input, st *agent.State) Result {
	t := st.Timings
	return Result{
		Index: i, Input: in, Output: st.Output, Attempts: st.ModelCalls, Turns: st.Turns,
		ToolCalls: st.ToolCalls, Repairs: st.Repairs, Truncations: st.Truncations, Usage: st.Usage,
		Timings: Timings{Queue: t.Queue, Inference: t.Inference, Tools: t.Tools, Backoff: t.Backoff, TTFT: t.TTFT, Total: t.Total},
	}
}

// finish checkpoints a finished agent, then hands its result to deliver. An
// agent stopped by the run's cancellation keeps its last completed turn
// instead, to resume from. A Checkpointer that can save asynchronously
// does, so that the agent's goroutine ends at once: deliver is then called
// from the Checkpointer once the state is durable.
func (e *Engine) finish(ctx context.Context, st *agent.State, r Result, deliver func(Result)) {
	if e.job.Checkpoint == nil || KindOf(r.Err) == KindCanceled {
		deliver(r)
		return
	}
	recordOutcome(st, r)
	if as, ok := e.job.Checkpoint.(asyncSaver); ok {
		as.SaveAsync(*st, func(err error) {
			if err != nil {
				e.saveFailed(ctx, st.Index, err)
				if e.job.StopOnCheckpointError {
					r = e.checkpointFailure(r, err)
				}
			}
			deliver(r)
		})
		return
	}
	if err := e.save(ctx, st); err != nil && e.job.StopOnCheckpointError {
		r = e.checkpointFailure(r, err)
	}
	deliver(r)
}

func (e *Engine) fail(i int, in Input, turn int, op string, err error, kind Kind, start time.Time) Result {
	return Result{
		Index:   i,
		Input:   in,
		Err:     &AgentError{JobID: e.job.ID, Agent: i, Turn: turn, Op: op, Kind: kind, Err: err},
		Timings: Timings{Total: time.Since(start)},
	}
}

// An outcome is a result on its way to delivery, with what its counters
// hold of work done before this run.
type outcome struct {
	Result
	// prior is the work of earlier runs: the saved turns of a resumed
	// agent, all of a result restored from the checkpoint.
	prior work
	// restored marks a result read from the checkpoint, not run.
	restored bool
}

// work is what an agent's counters hold.
type work struct {
	attempts, turns, toolCalls int
	usage                      llm.Usage
}

// workOf returns the counters of st; zero for nil.
func workOf(st *agent.State) work {
	if st == nil {
		return work{}
	}
	return work{attempts: st.ModelCalls, turns: st.Turns, toolCalls: st.ToolCalls, usage: st.Usage}
}

// deliver counts a result and calls the job's OnResult hook.
func (e *Engine) deliver(o outcome) {
	e.stats.add(o)
	r := o.Result
	if e.job.OnResult != nil {
		e.job.OnResult(r)
	}
	if r.Err != nil {
		e.log.LogAttrs(context.Background(), slog.LevelDebug, "agent failed",
			slog.String("job", e.job.ID), slog.Int("agent", r.Index), slog.Any("err", r.Err))
	}
}

// Stats is a snapshot of an engine's counters across its runs.
type Stats struct {
	// Started counts inputs admitted (agents started or failed at once).
	Started int64
	// Done counts results delivered; OK and Failed split them.
	Done, OK, Failed int64
	// Restored counts the results of Done read from the checkpoint: agents
	// finished by an earlier run. The counters of work below (model calls,
	// turns, tool calls, tokens) hold this engine's work only, so they
	// leave these out, and a resumed agent's turns of earlier runs too.
	Restored int64
	// ByKind counts failures by kind.
	ByKind map[Kind]int64
	// ModelCalls counts model call attempts.
	ModelCalls int64
	// Turns counts completed model turns.
	Turns int64
	// ToolRequested counts tool calls requested by models.
	ToolRequested int64
	// ToolExecuted counts tool executions (after coalescing and caching).
	ToolExecuted int64
	// Tools has the per-tool counters of the pool.
	Tools []tool.Stats
	// Usage sums the tokens of this engine's model calls.
	Usage llm.Usage
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
	// CheckpointErrors counts checkpoint saves that failed: those agents'
	// progress may be redone on resume.
	CheckpointErrors int64
	// RateLimits are the request and token budgets in force (configured
	// or learnt from the backend); zero means none.
	RateLimits RateLimit
}

// Stats returns a snapshot of the engine's counters. It is safe to call
// while runs are in progress.
func (e *Engine) Stats() Stats {
	s := e.stats.snapshot()
	if e.pool != nil {
		s.Tools = e.pool.Stats()
		for _, t := range s.Tools {
			s.ToolExecuted += t.Executed
		}
	}
	ss := e.adm.slots.Stats()
	s.Inflight, s.Waiting, s.Limit = ss.Inflight, ss.Waiting, ss.Limit
	if e.adm.aimd != nil {
		s.LimitHistory = e.adm.aimd.History()
	}
	s.Throttles = e.adm.throttl.Load()
	s.Pauses = e.adm.pauses.Load()
	rl := e.adm.rate.Limits()
	s.RateLimits = RateLimit{RPM: rl.RPM, TPM: rl.TPM}
	return s
}

// counters accumulates delivered results.
type counters struct {
	started, done, ok atomic.Int64
	restored          atomic.Int64
	ckptErrors        atomic.Int64
	modelCalls, turns atomic.Int64
	toolCalls         atomic.Int64
	prompt, compl     atomic.Int64
	cached            atomic.Int64
	byKind            [len(kinds)]atomic.Int64 // indexed like kinds
}

func (c *counters) add(o outcome) {
	r, p := o.Result, o.prior
	c.done.Add(1)
	if o.restored {
		c.restored.Add(1)
	}
	if r.Err == nil {
		c.ok.Add(1)
	} else {
		if i := slices.Index(kinds[:], KindOf(r.Err)); i >= 0 {
			c.byKind[i].Add(1)
		}
	}
	c.modelCalls.Add(int64(r.Attempts - p.attempts))
	c.turns.Add(int64(r.Turns - p.turns))
	c.toolCalls.Add(int64(r.ToolCalls - p.toolCalls))
	c.prompt.Add(r.Usage.PromptTokens - p.usage.PromptTokens)
	c.compl.Add(r.Usage.CompletionTokens - p.usage.CompletionTokens)
	c.cached.Add(r.Usage.CachedTokens - p.usage.CachedTokens)
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Started:          c.started.Load(),
		Done:             c.done.Load(),
		OK:               c.ok.Load(),
		Restored:         c.restored.Load(),
		CheckpointErrors: c.ckptErrors.Load(),
		ModelCalls:       c.modelCalls.Load(),
		Turns:            c.turns.Load(),
		ToolRequested:    c.toolCalls.Load(),
		Usage:            llm.Usage{PromptTokens: c.prompt.Load(), CompletionTokens: c.compl.Load(), CachedTokens: c.cached.Load()},
		ByKind:           map[Kind]int64{},
	}
	s.Failed = s.Done - s.OK
	for i, k := range kinds {
		if n := c.byKind[i].Load(); n > 0 {
			s.ByKind[k] = n
		}
	}
	return s
}
