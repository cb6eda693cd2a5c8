package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/sony/gobreaker/v2"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
	"github.com/batchagent/batchagent/tool"
)

// A runner is what the engine keeps of a Spec: its agent loop, wired to
// the engine's admission for its backend and class.
type runner struct {
	id      string
	flow    uint64 // the flow of the spec's Submits
	tmpl    *job.Template
	pool    *tool.Pool // nil: no tools
	agent   *agent.Runner
	gate    *gate
	timeout time.Duration
	fb      *fallbacks    // nil: the job has no fallbacks
	pk      *packer       // nil: the job's agents do not pack
	media   *job.MediaSet // nil: a text-only task
	// loader reads again, on resume, the task media a checkpoint saved
	// as references (see agent.State.Media); nil: the job has none.
	loader job.MediaLoader
}

// runnerOf returns the runner of spec, building it on first use. The
// engine forgets it once spec is garbage.
func (e *Engine) runnerOf(spec *job.Spec) (*runner, error) {
	key := weak.Make(spec)
	if r, ok := e.runners.Load(key); ok {
		return r.(*runner), nil
	}
	d := spec.Def()
	g, err := e.gateOf(spec)
	if err != nil {
		return nil, err
	}
	// The runner holds the parts of spec it needs, never spec itself: the
	// engine's map would keep spec alive.
	r := &runner{id: d.ID, flow: e.flows.Add(1), tmpl: spec.Template(), pool: spec.Pool(), gate: g, timeout: d.Timeout, media: spec.Media(), loader: d.MediaLoader}
	maxRetries := d.MaxRetries
	if d.NoRetries {
		maxRetries = -1
	}
	budget := d.OutageBudget
	if d.NoOutageBudget {
		budget = -1
	}
	cfg := agent.Config{
		Model:          d.Model,
		ModelName:      d.ModelName,
		System:         d.System,
		Tools:          spec.Pool(),
		Schema:         spec.Schema(),
		Check:          d.Check,
		MaxTurns:       d.MaxTurns,
		MaxRetries:     maxRetries,
		MaxTokens:      d.MaxTokens,
		MaxTokensLimit: d.MaxTokensLimit,
		ContextWindow:  d.ContextWindow,
		Backoff:        retry.Policy{Base: d.Backoff.Base, RateLimitBase: d.Backoff.RateLimitBase, Max: d.Backoff.Max},
		Temperature:    d.Temperature,
		TopP:           d.TopP,
		Seed:           d.Seed,
		StopSequences:  d.Stop,
		OutageBudget:   budget,
		Gauges:         &e.gauges,
	}
	if g.gated {
		cfg.Gate = &classGate{g: g, class: sched.Class(d.Priority)}
	}
	cfg.Stop, cfg.Stopped = e.draining.Load, e.drained
	if e.opt.Checkpoint != nil {
		cfg.OnTurn = func(ctx context.Context, st *agent.State) {
			if st.Output == nil { // the final turn is saved with the agent's result
				_ = e.save(ctx, st) // counted and logged; under StopOnCheckpointError it drains
			}
		}
	}
	if r.agent, err = agent.New(cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", job.ErrBadSpec, err)
	}
	if r.fb, err = e.fallbacksOf(spec, cfg, sched.Class(d.Priority)); err != nil {
		return nil, err
	}
	var br *gobreaker.TwoStepCircuitBreaker[struct{}]
	if r.fb != nil {
		br = r.fb.primary
	}
	r.pk = e.newPacker(spec, cfg, g, r.flow, br)
	if prev, loaded := e.runners.LoadOrStore(key, r); loaded {
		return prev.(*runner), nil
	}
	runtime.AddCleanup(spec, e.retire, key)
	return r, nil
}

// retire forgets the runner of a Spec that is garbage, keeping its tools'
// counters in the engine's. Every run and handle keeps its Spec alive
// until it ends, so none uses the runner any more.
func (e *Engine) retire(key weak.Pointer[job.Spec]) {
	v, ok := e.runners.Load(key)
	if !ok {
		return
	}
	e.toolsMu.Lock()
	defer e.toolsMu.Unlock()
	if pool := v.(*runner).pool; pool != nil {
		for _, t := range pool.Stats() {
			i := slices.IndexFunc(e.retiredTools, func(r tool.Stats) bool { return r.Name == t.Name })
			if i < 0 {
				e.retiredTools = append(e.retiredTools, tool.Stats{Name: t.Name})
				i = len(e.retiredTools) - 1
			}
			r := &e.retiredTools[i]
			r.Requested += t.Requested
			r.Executed += t.Executed
			r.Coalesced += t.Coalesced
			r.CacheHits += t.CacheHits
			r.Errors += t.Errors
			r.Batches += t.Batches
		}
	}
	e.runners.Delete(key)
}

// errNoSpec is the error of a call without a Spec.
var errNoSpec = fmt.Errorf("%w: nil spec", job.ErrBadSpec)

// Stream runs spec over inputs and yields results as they complete. With
// cancelRest, inputs not started before ctx ends still yield a canceled
// result each, so that every input has one.
func (e *Engine) Stream(ctx context.Context, spec *job.Spec, inputs iter.Seq2[job.Input, error], cancelRest bool) (iter.Seq[job.Result], error) {
	if spec == nil {
		return nil, errNoSpec
	}
	rn, err := e.runnerOf(spec)
	if err != nil {
		return nil, err
	}
	return func(yield func(job.Result) bool) {
		if !e.begin() {
			if cancelRest {
				i := 0
				for in, _ := range inputs {
					r := e.fail(rn.id, i, in, -1, "generate", ErrShutdown, job.KindCanceled, time.Now())
					if !yield(r) {
						return
					}
					i++
				}
			}
			return
		}
		defer e.work.Done()
		ctx, unbind := e.bind(ctx)
		defer unbind()
		ctx = context.WithValue(ctx, flowKey{}, e.flows.Add(1))
		ctx, unavailable := context.WithCancelCause(ctx)
		defer unavailable(nil)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		run := rn.gate.g.BeginRun(ctx)
		defer rn.gate.g.EndRun(run)
		tiers := rn.fb.beginTiers(ctx)
		defer rn.fb.endTiers(tiers)
		if rn.fb == nil {
			wg.Go(func() { e.stopIfUnavailable(ctx, rn, run, unavailable) })
		} else {
			// The primary's backend may be down while a fallback answers:
			// the run stops only once no tier can.
			wg.Go(func() { e.watchTiers(ctx, rn, run, tiers, unavailable) })
		}
		// Every result holds one of the engine's active tokens from
		// admission until it has been delivered; a run holds at most
		// MaxActive, so out never blocks a sender. It carries pointers:
		// a buffer of MaxActive outcomes by value was 3 MB at 10,000.
		out := make(chan *outcome, e.opt.MaxActive)
		wg.Go(func() {
			e.admit(ctx, rn, run, tiers, inputs, cancelRest, out)
			close(out)
		})
		stopped := false
		for o := range out {
			if !stopped {
				e.deliver(rn.id, o, e.opt.OnResult)
				if !yield(o.Result) {
					stopped = true
					cancel()
				}
			}
			<-e.active
		}
		cancel() // stops the unavailability watch
		wg.Wait()
		runtime.KeepAlive(spec) // its runner's counters stay live until the run ends
	}, nil
}

// stopIfUnavailable ends the run, with the unavailability error as its
// context's cause, once the run declared the backend unavailable; or
// returns when ctx ends.
func (e *Engine) stopIfUnavailable(ctx context.Context, rn *runner, run *sched.Run, stop context.CancelCauseFunc) {
	select {
	case <-run.Down():
		err := unavailable(run.Err())
		e.log.LogAttrs(ctx, slog.LevelError, "backend unavailable: stopping the run; unfinished inputs stay pending",
			slog.String("job", rn.id), slog.Any("err", err))
		stop(err)
	case <-ctx.Done():
	}
}

// admit reads inputs and starts one agent per input, while it holds one
// of the engine's active tokens. It returns when every started agent has
// sent its result.
func (e *Engine) admit(ctx context.Context, rn *runner, run *sched.Run, tiers []*sched.Run, inputs iter.Seq2[job.Input, error], cancelRest bool, out chan<- *outcome) {
	var agents sync.WaitGroup
	defer agents.Wait()
	// One function for every agent of the run, rather than a closure each.
	deliver := func(a *agentRun, r job.Result) {
		out <- &outcome{Result: r, prior: a.priorWork()}
		agents.Done()
	}
	// Without the checkpoint the run would redo or duplicate work: every
	// input fails with the load's error instead.
	saved, loadErr := e.loadCheckpoint(ctx, rn.id)
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
		case e.active <- struct{}{}:
			if stopped() { // ctx ended as the token came
				<-e.active
				return
			}
		case <-ctx.Done():
			if !cancelRest {
				return
			}
			// Wait for room without starting the agent: the canceled
			// result still needs a token.
			e.active <- struct{}{}
		}
		e.stats.started.Add(1)
		if err != nil {
			out <- &outcome{Result: e.fail(rn.id, i, nil, -1, "input", err, job.KindInput, time.Now())}
			continue
		}
		if loadErr != nil {
			out <- &outcome{Result: e.fail(rn.id, i, in, -1, "checkpoint", fmt.Errorf("load checkpoint: %w", loadErr), job.KindBackend, time.Now())}
			continue
		}
		prev, hasPrev := saved[i]
		delete(saved, i) // what it holds is freed as the run moves on
		if hasPrev && !prev.Input.Same(in) {
			// The state of another input at this index: run this one fresh.
			hasPrev = false
			e.log.LogAttrs(ctx, slog.LevelWarn, "saved state is of a different input: running the input again",
				slog.String("job", rn.id), slog.Int("agent", i))
		}
		if hasPrev && e.finished(prev) {
			out <- &outcome{Result: prev.Result(rn.id), prior: workOf(&prev), restored: true}
			continue
		}
		if ctx.Err() != nil || e.draining.Load() {
			errs := []error{context.Canceled, context.Cause(ctx)}
			if e.closedNow() {
				errs = append(errs, ErrShutdown)
			}
			out <- &outcome{Result: e.fail(rn.id, i, in, -1, "generate", errors.Join(errs...), job.KindCanceled, time.Now())}
			continue
		}
		var resume *agent.State
		if hasPrev && prev.Status == agent.StatusRunning && len(prev.Messages) > 0 {
			// A copy: prev itself stays off the heap for the agents that
			// resume nothing (taking its address moved it there, a large
			// value, on every input).
			p := prev
			resume = &p
		}
		agents.Add(1)
		a := &agentRun{rn: rn, run: run, tiers: tiers, i: i, in: in, st: resume, save: true, deliver: deliver}
		if resume != nil {
			a.prior = new(workOf(resume))
		}
		go e.runAgent(ctx, a)
	}
}

// closedNow reports whether Shutdown was called.
func (e *Engine) closedNow() bool {
	e.workMu.Lock()
	defer e.workMu.Unlock()
	return e.closed
}

// agentRun is one agent that runAgent runs, and what its steps share. It
// is on the heap, so that the frames on the agent's goroutine, which are
// under every one of its model calls and tool waits, hold a pointer to it
// rather than its fields: smaller frames let the goroutine keep its first
// stack (BenchmarkAgentMemory in package batchagent measures it).
type agentRun struct {
	rn  *runner
	run *sched.Run // the run's admission; nil: none
	// tiers are the runs on the gates of the fallback tiers, by tier (see
	// fallbacks.beginTiers); nil: none.
	tiers []*sched.Run
	i     int // the input's index
	in    job.Input
	// media are parts the agent's task carries after its text (see
	// Engine.SubmitMedia); nil: none.
	media []llm.Part
	// st is the agent's state: its checkpointed last completed turn when
	// it resumes (set before runAgent), else a fresh one.
	st    *agent.State
	fresh bool // st starts afresh: not resumed
	// prior is the work of earlier runs of a resumed agent; nil: none.
	prior *work
	// save checkpoints the agent's result before it is delivered.
	save  bool
	start time.Time
	// deliver hands the agent's result on; see done.
	deliver func(*agentRun, job.Result)
}

// done hands r, the agent's result, on.
func (a *agentRun) done(r job.Result) { a.deliver(a, r) }

// priorWork returns a.prior; zero for none.
func (a *agentRun) priorWork() work {
	if a.prior == nil {
		return work{}
	}
	return *a.prior
}

// runAgent runs the agent a to completion, from a.st when a checkpoint
// holds its last completed turn, and hands its result to a.deliver once
// it is checkpointed (when a.save is set).
func (e *Engine) runAgent(ctx context.Context, a *agentRun) {
	a.start = time.Now()
	ctx = withService(ctx)
	if sc, ok := agent.ObserverFrom(ctx).(agent.Scope); ok {
		ctx = scope(ctx, sc, a)
	}
	if a.st != nil && len(a.st.Media) > 0 && !e.resumeMedia(ctx, a) {
		return
	}
	if a.fresh = a.st == nil; a.fresh {
		if err := a.newState(ctx); err != nil {
			e.renderFailed(ctx, a, err)
			return
		}
	}
	a.st.Started = a.start
	actx := ctx
	if a.rn.timeout > 0 {
		// The timeout bounds the agent's work: its waits for admission
		// stop the clock.
		var cancel context.CancelFunc
		actx, cancel = withWorkClock(ctx, a.rn.timeout)
		defer cancel()
	}
	if a.rn.fb != nil {
		e.runTiered(ctx, actx, a)
		return
	}
	packed, after, err := a.packed(actx)
	if packed == 0 && err == nil {
		err = a.rn.agent.Run(actx, a.st)
		if after != nil {
			after(a.st, err)
		}
	}
	e.ran(ctx, actx, a, packed, err)
}

// scope returns ctx under sc's span of agent a, whose result then ends
// the span before it is delivered.
func scope(ctx context.Context, sc agent.Scope, a *agentRun) context.Context {
	ctx, end := sc.Agent(ctx, a.rn.id, a.i)
	next := a.deliver
	a.deliver = func(a *agentRun, r job.Result) {
		end(r)
		next(a, r)
	}
	return ctx
}

// newState sets a.st to the state of a fresh agent: its task rendered
// from its input, then the job's media for it, loaded now (so that only
// the agents running hold media bytes), then the media it was submitted
// with.
func (a *agentRun) newState(ctx context.Context) error {
	task, err := a.rn.tmpl.Render(a.in)
	if err != nil {
		return err
	}
	media := a.media
	var loaded []llm.Part
	if a.rn.media != nil {
		if loaded, err = a.rn.media.Load(ctx, a.in); err != nil {
			return err
		}
		media = append(loaded, a.media...)
	}
	// Room for the answer too: most agents end after one call, and
	// appending it to a full slice allocated the conversation twice.
	first := llm.Message{Role: llm.RoleUser, Content: task}
	if len(media) > 0 {
		a.media = media // the agent is never packed
		first.Content, first.Parts = "", make([]llm.Part, 0, 1+len(media))
		if task != "" {
			first.Parts = append(first.Parts, llm.Part{Kind: llm.PartText, Text: task})
		}
		first.Parts = append(first.Parts, media...)
	}
	msgs := append(make([]llm.Message, 0, 2), first)
	a.st = &agent.State{JobID: a.rn.id, Index: a.i, Input: a.in, Status: agent.StatusRunning, Messages: msgs}
	// The references of the job's media read from files or fetched: a
	// checkpoint saves them in place of the bytes.
	a.st.Media = agent.MediaRefs(loaded)
	return nil
}

// resumeMedia reads again the task media of the resumed agent a (see
// reloadMedia): when one changed, a starts afresh from its task (its
// saved turns were of other media); when one cannot be read, a fails
// (kind input) and resumeMedia reports false. It is apart from runAgent
// to keep that frame, which is under all of an agent's work, small.
//
//go:noinline
func (e *Engine) resumeMedia(ctx context.Context, a *agentRun) bool {
	changed, err := a.reloadMedia(ctx)
	if err != nil {
		e.renderFailed(ctx, a, err)
		return false
	}
	if changed != "" {
		e.log.LogAttrs(ctx, slog.LevelWarn, "the media of a saved agent changed: running the input again from its task",
			slog.String("job", a.rn.id), slog.Int("agent", a.i), slog.String("media", changed))
		a.st, a.prior = nil, nil
	}
	return true
}

// reloadMedia reads again, through the job's MediaLoader, the task media
// of a.st, the state of a resumed agent, which its checkpoint saved
// without their bytes (see agent.State.Media), and puts the bytes back in
// its messages. It returns the reference of the first one whose hash is
// no longer the saved one ("" when none changed): the input changed, and
// the agent must start afresh. A file gone or unreadable is a
// *job.MediaError, which fails the input (kind input).
func (a *agentRun) reloadMedia(ctx context.Context) (changed string, err error) {
	for mi := range a.st.Messages {
		parts := a.st.Messages[mi].Parts
		for pi := range parts {
			p := &parts[pi]
			if p.Data != nil || p.URL != "" {
				continue
			}
			ref, ok := a.st.MediaRef(p)
			if !ok {
				continue
			}
			const field = "saved media"
			if a.rn.loader == nil {
				return "", &job.MediaError{Field: field, Ref: ref.Ref, Err: fmt.Errorf("%s: the job has no media loader to read it again on resume", ref.Ref)}
			}
			fresh, err := a.rn.loader.Load(ctx, ref.Kind, ref.Ref)
			if err != nil {
				return "", &job.MediaError{Field: field, Ref: ref.Ref, Err: err}
			}
			if fresh.Hash != ref.Hash {
				return ref.Ref, nil
			}
			fresh.Detail = p.Detail
			*p = fresh
		}
	}
	return "", nil
}

// renderFailed finishes the agent a, whose task could not be rendered
// from its input, or whose media could not be loaded: a media error
// fails the input (kind input), unless the agent's context ended first
// (canceled).
func (e *Engine) renderFailed(ctx context.Context, a *agentRun, err error) {
	op, kind := "render", job.KindTemplate
	if _, ok := errors.AsType[*job.MediaError](err); ok {
		op, kind = "input", job.KindInput
	}
	if ctx.Err() != nil {
		op, kind, err = "generate", job.KindCanceled, errors.Join(err, context.Cause(ctx))
	}
	r := e.fail(a.rn.id, a.i, a.in, -1, op, err, kind, a.start)
	e.finish(ctx, a, &agent.State{JobID: a.rn.id, Index: a.i, Input: a.in, Started: a.start}, r)
}

// ran finishes the agent a, which ran on the job's model until it
// returned err, packed being the agents of the packed call that answered
// it (0: none). It is apart from runAgent so that the result, a large
// value, is not in the frame of runAgent, which is on the goroutine's
// stack all through the agent's run: a larger frame there made every
// agent's goroutine grow its stack once more.
func (e *Engine) ran(ctx, actx context.Context, a *agentRun, packed int, err error) {
	rn, st := a.rn, a.st
	r := resultOf(a.i, a.in, st)
	r.Packed = packed
	r.Timings.Total = time.Since(a.start)
	if err != nil {
		ae := &job.AgentError{JobID: rn.id, Agent: a.i, Turn: -1, Op: "generate", Err: err}
		if se, ok := errors.AsType[*agent.Error](err); ok {
			ae.Turn, ae.Op, ae.Err = se.Turn, se.Op, se.Err
		}
		timedOut := errors.Is(context.Cause(actx), job.ErrAgentTimeout)
		if timedOut {
			ae.Err = agentTimedOut(rn.timeout, ae.Err)
		}
		canceled := ctx.Err() != nil || errors.Is(err, agent.ErrStopped)
		// The gate sees every call: it knows whether any was answered.
		// Ungated, no call is observed and the backend is never declared down.
		var down error
		if rn.gate.gated && a.run != nil {
			down = unavailable(rn.gate.g.GaveUp(a.run, errors.Is(ae.Err, llm.ErrConnection), ae.Err))
		}
		if down != nil {
			// Stopped by the unavailable backend, whichever error it
			// saw first: no answer came, so it stays pending.
			ae.Err, canceled, timedOut = down, true, false
		}
		if canceled && e.closedNow() && !errors.Is(ae.Err, ErrShutdown) {
			ae.Err = errors.Join(ae.Err, ErrShutdown)
		}
		ae.Kind = job.Classify(ae.Err, timedOut, canceled)
		r.Err, r.Output, r.Raw = ae, nil, st.Raw
	}
	e.finish(ctx, a, st, r)
}

// packed runs the agent a in a packed call when its job packs and it
// starts afresh. It returns the agents of the packed call that answered
// it, or its error; 0 and no error when the agent must run alone, with
// what to call once it ran (packer.answer; nil: nothing).
func (a *agentRun) packed(ctx context.Context) (int, func(*agent.State, error), error) {
	if a.rn.pk == nil || !a.fresh || len(a.media) > 0 {
		return 0, nil, nil
	}
	return a.rn.pk.answer(ctx, a.i, a.st)
}

// resultOf returns the result of agent i, whose input is in, from its
// state: output, counters, usage, timings (Total as saved with a final
// state; the engine sets it for the agents it runs), start and spans (the
// result shares st's).
func resultOf(i int, in job.Input, st *agent.State) job.Result {
	t := st.Timings
	return job.Result{
		Index: i, Input: in, Output: st.Output, ModelCalls: st.ModelCalls, Turns: st.Turns,
		ToolCalls: st.ToolCalls, ToolErrors: st.ToolErrors, Repairs: st.Repairs, Truncations: st.Truncations, Compactions: st.Compactions, Usage: st.Usage,
		Timings: job.Timings{Queue: t.Queue, Inference: t.Inference, Tools: t.Tools, Backoff: t.Backoff, TTFT: t.TTFT, Total: t.Total},
		Started: st.Started, Spans: st.Spans,
	}
}

// finish checkpoints a finished agent a, whose state is st, then hands
// its result on (agentRun.done). An agent stopped by the run's
// cancellation keeps its last completed turn instead, to resume from. A
// Checkpointer that can save asynchronously does, so that the agent's
// goroutine ends at once: the result is then handed on from the
// Checkpointer once the state is durable.
func (e *Engine) finish(ctx context.Context, a *agentRun, st *agent.State, r job.Result) {
	if r.Err != nil {
		e.logPanic(ctx, a.rn.id, a.i, r.Err)
	}
	if !a.save || e.opt.Checkpoint == nil || job.KindOf(r.Err) == job.KindCanceled {
		a.done(r)
		return
	}
	st.Finish(&r)
	if as, ok := e.opt.Checkpoint.(asyncSaver); ok {
		e.saveAsync(ctx, as, a, st, r)
		return
	}
	if err := e.save(ctx, st); err != nil && e.opt.StopOnCheckpointError {
		r = e.checkpointFailure(st.JobID, r, err)
	}
	a.done(r)
}

// saveAsync saves st through as and hands r on once it is durable. It is
// apart from finish so that only the results saved asynchronously, which
// its callback keeps, are moved to the heap: in finish, every result was.
// Inlined, it would move them again.
//
//go:noinline
func (e *Engine) saveAsync(ctx context.Context, as asyncSaver, a *agentRun, st *agent.State, r job.Result) {
	as.SaveAsync(st, func(err error) {
		if err != nil {
			e.saveFailed(ctx, st.JobID, st.Index, err)
			if e.opt.StopOnCheckpointError {
				r = e.checkpointFailure(st.JobID, r, err)
			}
		}
		a.done(r)
	})
}

func (e *Engine) fail(id string, i int, in job.Input, turn int, op string, err error, kind job.Kind, start time.Time) job.Result {
	return job.Result{
		Index:   i,
		Input:   in,
		Err:     &job.AgentError{JobID: id, Agent: i, Turn: turn, Op: op, Kind: kind, Err: err},
		Timings: job.Timings{Total: time.Since(start)},
		Started: start,
	}
}

// An outcome is a result on its way to delivery, with what its counters
// hold of work done before this run.
type outcome struct {
	job.Result
	// prior is the work of earlier runs: the saved turns of a resumed
	// agent, all of a result restored from the checkpoint.
	prior work
	// restored marks a result read from the checkpoint, not run.
	restored bool
}

// work is what an agent's counters hold.
type work struct {
	modelCalls, turns, toolCalls int
	usage                        llm.Usage
}

// workOf returns the counters of st; zero for nil.
func workOf(st *agent.State) work {
	if st == nil {
		return work{}
	}
	return work{modelCalls: st.ModelCalls, turns: st.Turns, toolCalls: st.ToolCalls, usage: st.Usage}
}

// deliver calls onResult, if set, with a result of job id and counts it.
// When onResult panics, the result as delivered and counted is a failure
// of kind panic (its checkpoint, already saved, keeps the agent's outcome).
func (e *Engine) deliver(id string, o *outcome, onResult func(job.Result)) {
	if onResult != nil {
		if err := e.onResult(id, onResult, o.Result); err != nil {
			o.Err = &job.AgentError{JobID: id, Agent: o.Index, Turn: -1, Op: "on_result", Kind: job.KindPanic, Err: err}
			o.Output, o.Raw = nil, ""
		}
	}
	e.stats.add(o)
	r := o.Result
	if r.Err != nil {
		e.log.LogAttrs(context.Background(), slog.LevelDebug, "agent failed",
			slog.String("job", id), slog.Int("agent", r.Index), slog.Any("err", r.Err))
	}
}

// agentTimedOut returns err, the failure of an agent whose work clock ran
// out of its timeout d, saying so. The clock ends the agent's context
// with a cancel: a bare context.Canceled in err is, for the agent, the
// deadline of its timeout, and reads and classes as one.
func agentTimedOut(d time.Duration, err error) error {
	switch {
	case errors.Is(err, job.ErrAgentTimeout):
		return err
	case err == context.Canceled:
		return fmt.Errorf("%w (%v of work; waits for admission not counted): %w", job.ErrAgentTimeout, d, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		// The cancel with more beside it (what the agent was retrying):
		// kept in the message.
		return fmt.Errorf("%w (%v of work; waits for admission not counted): %w (when it ended: %v)", job.ErrAgentTimeout, d, context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%w (%v of work; waits for admission not counted): %w", job.ErrAgentTimeout, d, err)
}
