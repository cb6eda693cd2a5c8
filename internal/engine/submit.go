package engine

import (
	"context"
	"runtime"
	"time"

	"github.com/batchagent/batchagent/job"
)

// Submit starts one agent of spec on in and returns at once; end is
// called exactly once with its result, maybe before Submit returns (a nil
// spec, an engine shut down). The returned function cancels the agent.
// See batchagent.Engine.Submit.
func (e *Engine) Submit(ctx context.Context, spec *job.Spec, in job.Input, end func(job.Result)) context.CancelFunc {
	i := int(e.seq.Add(1) - 1)
	none := func() {}
	if spec == nil {
		end(e.fail("", i, in, -1, "submit", errNoSpec, job.KindInput, time.Now()))
		return none
	}
	rn, err := e.runnerOf(spec)
	if err != nil {
		end(e.fail(spec.ID(), i, in, -1, "submit", err, job.KindInput, time.Now()))
		return none
	}
	if !e.begin() {
		end(e.fail(rn.id, i, in, -1, "submit", ErrShutdown, job.KindCanceled, time.Now()))
		return none
	}
	ctx, cancel := e.bind(ctx)
	ctx = context.WithValue(ctx, flowKey{}, rn.flow)
	e.stats.started.Add(1)
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
		e.runAgent(ctx, rn, run, i, in, nil, false, func(r job.Result) {
			e.stats.add(outcome{Result: r})
			end(r)
		})
	}()
	return cancel
}
