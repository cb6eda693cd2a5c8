package engine

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// Submit starts one agent of spec on in and returns at once; end is
// called exactly once with its result, maybe before Submit returns (a nil
// spec, an engine shut down). The returned function cancels the agent.
// See batchagent.Engine.Submit.
func (e *Engine) Submit(ctx context.Context, spec *job.Spec, in job.Input, end func(job.Result)) context.CancelFunc {
	return e.SubmitMedia(ctx, spec, in, nil, end)
}

// SubmitMedia is Submit with media: the agent's first message holds its
// task's text, then media (images, audio, documents), as its parts. An
// agent with media is never packed with others.
func (e *Engine) SubmitMedia(ctx context.Context, spec *job.Spec, in job.Input, media []llm.Part, end func(job.Result)) context.CancelFunc {
	i := int(e.seq.Add(1) - 1)
	rn, ctx, cancel, ok := e.start(ctx, spec, i, in, "submit", end)
	if !ok {
		return cancel
	}
	go func() { // owned by the engine: Shutdown waits for it
		defer e.work.Done()
		defer cancel()
		defer runtime.KeepAlive(spec) // its runner's counters stay live until the agent ends
		if e.draining.Load() {
			end(e.fail(rn.id, i, in, -1, "generate", ErrShutdown, job.KindCanceled, time.Now()))
			return
		}
		run := rn.gate.g.BeginRun(ctx) // keeps the backend's queue probe going
		defer rn.gate.g.EndRun(run)
		tiers := rn.fb.beginTiers(ctx)
		defer rn.fb.endTiers(tiers)
		e.runAgent(ctx, &agentRun{rn: rn, run: run, tiers: tiers, i: i, in: in, media: media, deliver: func(_ *agentRun, r job.Result) {
			e.stats.add(&outcome{Result: r})
			end(r)
		}})
	}()
	return cancel
}

// start registers one agent of spec (input in at index i) with the engine
// for Submit or Agent (op names the step in errors): its runner, its
// context bound to the engine and in the runner's flow, and the function
// that cancels it. When the agent cannot start (no spec, a bad spec, the
// engine shut down), end gets its failed result and ok is false.
func (e *Engine) start(ctx context.Context, spec *job.Spec, i int, in job.Input, op string, end func(job.Result)) (rn *runner, _ context.Context, cancel context.CancelFunc, ok bool) {
	none := func() {}
	if spec == nil {
		end(e.fail("", i, in, -1, op, errNoSpec, job.KindInput, time.Now()))
		return nil, ctx, none, false
	}
	rn, err := e.runnerOf(spec)
	if err != nil {
		end(e.fail(spec.ID(), i, in, -1, op, err, job.KindInput, time.Now()))
		return nil, ctx, none, false
	}
	if !e.begin() {
		end(e.fail(rn.id, i, in, -1, op, ErrShutdown, job.KindCanceled, time.Now()))
		return nil, ctx, none, false
	}
	ctx, cancel = e.bind(ctx)
	ctx = context.WithValue(ctx, flowKey{}, rn.flow)
	e.stats.started.Add(1)
	return rn, ctx, cancel, true
}

// StateLoader is a Checkpointer that loads one agent's saved state; see
// batchagent.StateLoader.
type StateLoader interface {
	LoadState(ctx context.Context, jobID string, index int) (agent.State, bool, error)
}

// Agent runs the agent of input in at index i of spec's job, continuing
// from its checkpointed state when the Checkpointer holds one (a result
// already recorded is returned as it was), and calls end with its result
// once it is checkpointed. It returns at once; the returned function
// cancels the agent. See batchagent.Engine.Agent.
func (e *Engine) Agent(ctx context.Context, spec *job.Spec, i int, in job.Input, end func(job.Result)) context.CancelFunc {
	rn, ctx, cancel, ok := e.start(ctx, spec, i, in, "agent", end)
	if !ok {
		return cancel
	}
	go func() { // owned by the engine: Shutdown waits for it
		defer e.work.Done()
		defer cancel()
		defer runtime.KeepAlive(spec)
		deliver := func(o *outcome) {
			e.stats.add(o)
			end(o.Result)
		}
		prev, ok, err := e.loadState(ctx, rn.id, i)
		if err != nil {
			deliver(&outcome{Result: e.fail(rn.id, i, in, -1, "checkpoint", fmt.Errorf("load checkpoint: %w", err), job.KindBackend, time.Now())})
			return
		}
		if ok && !prev.Input.Same(in) {
			ok = false // the state of another input at this index: run afresh
		}
		if ok && e.finished(prev) {
			deliver(&outcome{Result: prev.Result(rn.id), prior: workOf(&prev), restored: true})
			return
		}
		if e.draining.Load() {
			deliver(&outcome{Result: e.fail(rn.id, i, in, -1, "generate", ErrShutdown, job.KindCanceled, time.Now())})
			return
		}
		var resume *agent.State
		if ok && prev.Status == agent.StatusRunning && len(prev.Messages) > 0 {
			resume = &prev
		}
		run := rn.gate.g.BeginRun(ctx) // keeps the backend's queue probe going
		defer rn.gate.g.EndRun(run)
		tiers := rn.fb.beginTiers(ctx)
		defer rn.fb.endTiers(tiers)
		a := &agentRun{rn: rn, run: run, tiers: tiers, i: i, in: in, st: resume, save: true, deliver: func(a *agentRun, r job.Result) {
			deliver(&outcome{Result: r, prior: a.priorWork()})
		}}
		if resume != nil {
			a.prior = new(workOf(resume))
		}
		e.runAgent(ctx, a)
	}()
	return cancel
}

// loadState returns the saved state of agent i of job id, if any: through
// the Checkpointer's LoadState when it has one, else from its Load.
func (e *Engine) loadState(ctx context.Context, id string, i int) (agent.State, bool, error) {
	cp := e.opt.Checkpoint
	if cp == nil {
		return agent.State{}, false, nil
	}
	if sl, ok := cp.(StateLoader); ok {
		return sl.LoadState(ctx, id, i)
	}
	states, err := cp.Load(ctx, id)
	if err != nil {
		return agent.State{}, false, err
	}
	for _, st := range states {
		if st.Index == i {
			return st, true, nil
		}
	}
	return agent.State{}, false, nil
}
