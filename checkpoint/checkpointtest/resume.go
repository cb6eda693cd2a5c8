package checkpointtest

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// Sizes of testResumeRun's job.
const (
	resumeInputs   = 40
	resumeStopAt   = 10 // results of the first run before it is cancelled
	resumeTurns    = 2  // the simulator calls the tool once, then answers
	resumeSimSeed  = 7
	resumeJobID    = "resume"
	resumeSchema   = `{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`
	resumeLatency  = 2 * time.Millisecond
	resumeMaxAgent = 8
	resumeInvalid  = 0.2 // of final answers, each failing its input
)

// resumeJob returns the job of testResumeRun on a fresh simulator: one
// tool turn, then a structured answer, invalid for some inputs (which
// fail, deterministically), at most resumeMaxAgent agents at
// once so that a cancelled run leaves some inputs done, some between turns
// and some not started.
func resumeJob(t testing.TB, c batchagent.Checkpointer) (*batchagent.Spec, *batchagent.Engine, *sim.Model) {
	t.Helper()
	m, err := sim.New(sim.Config{Seed: resumeSimSeed, Latency: resumeLatency, Jitter: 0.5, InvalidRate: resumeInvalid})
	if err != nil {
		t.Fatalf("sim.New = %v", err)
	}
	read := tool.Func(tool.Spec{Name: "read_file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			return "contents of " + string(args), nil
		})
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID: resumeJobID, Model: m, Task: "read the file {id}.txt, numbered {big}", Tools: []tool.Tool{read},
		OutputSchema: json.RawMessage(resumeSchema),
		NoRetries:    true, // an invalid answer fails the input: failed results are restored too
	})
	if err != nil {
		t.Fatalf("batchagent.NewSpec = %v", err)
	}
	e, err := batchagent.New(batchagent.Config{MaxActive: resumeMaxAgent, Checkpoint: c})
	if err != nil {
		t.Fatalf("batchagent.New = %v", err)
	}
	return spec, e, m
}

// stream is e.Stream of spec over the inputs of testResumeRun.
func stream(ctx context.Context, t testing.TB, e *batchagent.Engine, spec *batchagent.Spec) iter.Seq[batchagent.Result] {
	t.Helper()
	seq, err := e.Stream(ctx, spec, batchagent.Slice(resumeInputsOf()))
	if err != nil {
		t.Fatalf("Engine.Stream = %v", err)
	}
	return seq
}

// resumeInputsOf returns the inputs of testResumeRun, numbers as a JSON
// reader yields them.
func resumeInputsOf() []batchagent.Input {
	in := make([]batchagent.Input, resumeInputs)
	for i := range in {
		in[i] = exactInput(i)
	}
	return in
}

// testResumeRun runs a job on the simulator with the Checkpointer,
// cancels it after a few results, and resumes it with a second Engine on
// the same Checkpointer: every input gets exactly one result, equal to a
// fresh run's; finished inputs are not run again, and agents stopped
// between turns go on from their last saved turn.
func testResumeRun(t testing.TB, c batchagent.Checkpointer) {
	c = guard(t, c)
	defer checkGuard(t, c)
	fresh := runFresh(t)

	// First run: cancelled once resumeStopAt results have come.
	spec1, e1, m1 := resumeJob(t, c)
	ctx, cancel := context.WithCancel(ctxOf(t))
	defer cancel()
	delivered := 0
	finalFirst := map[int]agent.Status{} // the results the first run delivered, but canceled ones
	for r := range stream(ctx, t, e1, spec1) {
		if delivered++; delivered == resumeStopAt {
			cancel()
		}
		switch batchagent.KindOf(r.Err) {
		case "":
			finalFirst[r.Index] = agent.StatusDone
		case batchagent.KindCanceled:
		default:
			finalFirst[r.Index] = agent.StatusFailed
		}
	}
	if len(finalFirst) == 0 || len(finalFirst) == resumeInputs {
		t.Fatalf("the first run finished %d of %d inputs before it was cancelled, want some but not all", len(finalFirst), resumeInputs)
	}

	// What the second run must do, from what the Checkpointer holds.
	saved := load(t, c, resumeJobID)
	wantCalls, restored, running := 0, 0, 0
	for i := range resumeInputs {
		st, ok := saved[i]
		if want, final := finalFirst[i]; final && (!ok || st.Status != want) {
			t.Errorf("input %d: the first run delivered its result (%s), but Load returns %s", i, want, describeLoaded(st, ok))
		}
		switch {
		case !ok:
			wantCalls += resumeTurns
		case st.Status == agent.StatusRunning:
			wantCalls += resumeTurns - st.Turns
			running++
		default:
			restored++
		}
	}
	t.Logf("cancelled run left %d inputs finished, %d between turns, %d not started", restored, running, resumeInputs-restored-running)

	// Second run, by a second Engine on the same Checkpointer.
	spec2, e2, m2 := resumeJob(t, c)
	got := map[int]batchagent.Result{}
	for r := range stream(ctxOf(t), t, e2, spec2) {
		if _, dup := got[r.Index]; dup {
			t.Errorf("resumed run: input %d has two results", r.Index)
		}
		got[r.Index] = r
	}
	for i := range resumeInputs {
		r, ok := got[i]
		if !ok {
			t.Errorf("resumed run: input %d has no result", i)
			continue
		}
		if diff := cmp.Diff(comparable(fresh[i]), comparable(r), stateOpts); diff != "" {
			t.Errorf("resumed run: input %d: result differs from a fresh run's (-fresh +resumed):\n%s", i, diff)
		}
	}
	if st := e2.Stats(); st.Restored != int64(restored) {
		t.Errorf("resumed run restored %d results, want the %d final states Load returned", st.Restored, restored)
	}
	if calls := m2.Stats().Calls; calls != int64(wantCalls) {
		t.Errorf("resumed run made %d model calls, want %d: none for done inputs, the rest of the turns for running ones (first run: %d calls)",
			calls, wantCalls, m1.Stats().Calls)
	}
}

// runFresh runs testResumeRun's job without a Checkpointer and returns its
// results by index: most successful, some failed validation.
func runFresh(t testing.TB) []batchagent.Result {
	t.Helper()
	spec, e, _ := resumeJob(t, nil)
	res, err := e.Run(ctxOf(t), spec, batchagent.Slice(resumeInputsOf()))
	if err != nil {
		t.Fatalf("fresh run: %v", err)
	}
	if len(res) != resumeInputs {
		t.Fatalf("fresh run: %d results, want %d", len(res), resumeInputs)
	}
	failed := 0
	for _, r := range res {
		if k := batchagent.KindOf(r.Err); k == batchagent.KindValidation {
			failed++
		} else if r.Err != nil {
			t.Fatalf("fresh run: input %d: %v, want a success or a validation failure", r.Index, r.Err)
		}
	}
	if failed == 0 || failed == resumeInputs {
		t.Fatalf("fresh run: %d of %d inputs failed, want some but not all", failed, resumeInputs)
	}
	return res
}

// comparable returns what a resumed result shares with a fresh one: all
// but the timings, start and spans' times, which measure a different run;
// the spans' turns are kept (a resumed agent keeps its earlier spans).
func comparable(r batchagent.Result) resultView {
	v := viewOf(r)
	v.Result.Timings = batchagent.Timings{}
	v.Result.Started = time.Time{}
	v.Result.Spans = nil
	for _, sp := range r.Spans {
		v.Result.Spans = append(v.Result.Spans, batchagent.Span{Turn: sp.Turn, Tier: sp.Tier})
	}
	return v
}

// describeLoaded describes what Load returned for an input.
func describeLoaded(st agent.State, ok bool) string {
	if !ok {
		return "no state"
	}
	return fmt.Sprintf("a %s state (turn %d)", st.Status, st.Turns)
}

// guarded is a Checkpointer with SaveAsync whose done callbacks reach the
// engine once each: a second call is counted, not passed on (the engine
// would deliver the result twice, and panic).
type guarded struct {
	batchagent.Checkpointer
	as    AsyncSaver
	extra atomic.Int64 // done calls after the first, of any state
}

// guard returns c as the engine should see it: c itself, or guarded when
// c has SaveAsync.
func guard(t testing.TB, c batchagent.Checkpointer) batchagent.Checkpointer {
	if as, ok := c.(AsyncSaver); ok {
		return &guarded{Checkpointer: c, as: as}
	}
	return c
}

// checkGuard fails t when a guarded Checkpointer called a done twice.
func checkGuard(t testing.TB, c batchagent.Checkpointer) {
	if g, ok := c.(*guarded); ok && g.extra.Load() > 0 {
		t.Errorf("SaveAsync: done called %d times more than once per state, want exactly once", g.extra.Load())
	}
}

func (g *guarded) SaveAsync(s *agent.State, done func(error)) {
	var calls atomic.Int32
	g.as.SaveAsync(s, func(err error) {
		if calls.Add(1) > 1 {
			g.extra.Add(1)
			return
		}
		done(err)
	})
}
