package checkpointtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// testEmptyJob: a job with no saved state loads as none, without error.
func testEmptyJob(t testing.TB, c batchagent.Checkpointer) {
	states, err := c.Load(ctxOf(t), "never-saved")
	if err != nil || len(states) != 0 {
		t.Errorf("Load of a job never saved = %d states, %v; want none, nil", len(states), err)
	}
}

// testRunningRoundTrip: a state in progress comes back whole, conversation
// included: the engine resumes the agent from it.
func testRunningRoundTrip(t testing.TB, c batchagent.Checkpointer) {
	want := runningState("job", 3)
	save(t, c, want)
	got := loadOne(t, c, "job", 3)
	if len(got.Messages) != len(want.Messages) {
		t.Errorf("running state: Load returned %d messages, want all %d: the engine resumes from them", len(got.Messages), len(want.Messages))
	}
	checkState(t, describe(want), want, got)
}

// testFinalRoundTrip: done and failed states come back with their output,
// failure fields, counters, token cap, usage and timings (Total included);
// their Messages may be left out.
func testFinalRoundTrip(t testing.TB, c batchagent.Checkpointer) {
	for _, want := range []agent.State{doneState("job", 0), failedState("job", 1), earlyFailedState("job", 2)} {
		save(t, c, want)
	}
	got := load(t, c, "job")
	for _, want := range []agent.State{doneState("job", 0), failedState("job", 1), earlyFailedState("job", 2)} {
		st, ok := got[want.Index]
		if !ok {
			t.Errorf("%s: not loaded", describe(want))
			continue
		}
		if st.Messages != nil && len(st.Messages) != len(want.Messages) {
			t.Errorf("%s: Load returned %d of its %d messages; a final state's must be all or none", describe(want), len(st.Messages), len(want.Messages))
		}
		checkState(t, describe(want), want, st)
	}
}

// testResultRoundTrip: the result a resumed run rebuilds from a loaded
// final state is the one it would rebuild from the saved state: the same
// output, counters, usage, timings, and an error of the same kind, step,
// turn, message and schema problems.
func testResultRoundTrip(t testing.TB, c batchagent.Checkpointer) {
	saved := []agent.State{doneState("job", 0), failedState("job", 1), earlyFailedState("job", 2)}
	for _, st := range saved {
		save(t, c, st)
	}
	got := load(t, c, "job")
	for _, st := range saved {
		want := viewOf(st.Result("job"))
		ld, ok := got[st.Index]
		if !ok {
			t.Errorf("%s: not loaded", describe(st))
			continue
		}
		if diff := cmp.Diff(want, viewOf(ld.Result("job")), stateOpts); diff != "" {
			t.Errorf("%s: Result of the loaded state differs from that of the saved one (-saved +loaded):\n%s", describe(st), diff)
		}
	}
}

// resultView is a Result with its error spelled out, for comparing.
type resultView struct {
	Result   batchagent.Result // without Err
	Err      string
	Kind     batchagent.Kind
	Op       string
	Turn     int
	Problems []schema.Problem
	// Is lists the error classes the error answers errors.Is for.
	Is []string
}

// classes are the error classes a result's error may answer errors.Is for.
var classes = []error{
	llm.ErrRateLimited, llm.ErrOverloaded, llm.ErrServer, llm.ErrTimeout, llm.ErrConnection,
	llm.ErrContextLength, llm.ErrBadRequest, llm.ErrAuth, llm.ErrTruncated,
	context.Canceled, context.DeadlineExceeded, agent.ErrMaxTurns, tool.ErrFatal,
	batchagent.ErrCheckpoint, batchagent.ErrBackendUnavailable,
}

func viewOf(r batchagent.Result) resultView {
	v := resultView{Result: r, Kind: batchagent.KindOf(r.Err)}
	v.Result.Err = nil
	if r.Err == nil {
		return v
	}
	v.Err = r.Err.Error()
	if ae, ok := errors.AsType[*batchagent.AgentError](r.Err); ok {
		v.Op, v.Turn = ae.Op, ae.Turn
	}
	if ve, ok := errors.AsType[*schema.ValidationError](r.Err); ok {
		v.Problems = ve.Problems
	}
	for _, c := range classes {
		if errors.Is(r.Err, c) {
			v.Is = append(v.Is, c.Error())
		}
	}
	return v
}

// testExactInputs: an input comes back as the exact JSON it was saved
// with: numbers as json.Number holding their text (no rounding of big
// integers, 1e999 kept), strings, nulls, nested values; and Go values
// (int, float64) as the same JSON. The engine uses a saved state only for
// the input it holds, so an input that comes back changed is run again,
// and a restored result must equal the fresh one.
func testExactInputs(t testing.TB, c batchagent.Checkpointer) {
	exact := runningState("job", 0)
	done := doneState("job", 1)
	goValues := turnState("job", 2, 1)
	goValues.Input = job.Input{"int": 7, "float": 0.1, "big": 1e300, "neg": -2.5, "list": []any{1, "x"}}
	for _, st := range []agent.State{exact, done, goValues} {
		save(t, c, st)
	}
	got := load(t, c, "job")
	for _, st := range []agent.State{exact, done} {
		if diff := cmp.Diff(st.Input, got[st.Index].Input); diff != "" {
			t.Errorf("%s: Input differs (-saved +loaded); numbers must come back as json.Number with their text (decode with UseNumber):\n%s", describe(st), diff)
		}
	}
	want, _ := json.Marshal(goValues.Input)
	if b, err := json.Marshal(got[2].Input); err != nil || string(b) != string(want) {
		t.Errorf("%s: Input of Go values loads as JSON %s (%v), want %s", describe(goValues), b, err, want)
	}
}

// testReplace: a later Save of the same job and index replaces the
// earlier one, whatever the statuses: turn after turn, then the final
// state, then (a failed input run again) a running state and a new final
// state.
func testReplace(t testing.TB, c batchagent.Checkpointer) {
	steps := []agent.State{
		turnState("job", 5, 1),
		turnState("job", 5, 2),
		finalTurnState("job", 5, 3),
		turnState("job", 5, 1),
		failedState("job", 5),
		turnState("job", 5, 4),
		finalTurnState("job", 5, 6),
	}
	for i, st := range steps {
		save(t, c, st)
		checkState(t, fmt.Sprintf("after save %d of %d (%s)", i+1, len(steps), describe(st)), st, loadOne(t, c, "job", 5))
	}
}

// testJobsApart: the states of one job never show in another's Load, for
// job IDs that differ only in case, by a prefix, or by characters that SQL
// LIKE, paths or quoting treat specially.
func testJobsApart(t testing.TB, c batchagent.Checkpointer) {
	ids := []string{"job", "Job", "job2", "jo", "job%", "job_", "j'ob", "job/1", "job 1", "jöb", "job\x00x", ""}
	for n, id := range ids {
		save(t, c, turnState(id, 0, n+1)) // same index in every job
		save(t, c, finalTurnState(id, n+1, n+1))
	}
	for n, id := range ids {
		got := load(t, c, id)
		if len(got) != 2 {
			t.Errorf("Load(%q) = states of indexes %v, want 0 and %d only", id, slices.Sorted(maps.Keys(got)), n+1)
		}
		checkState(t, fmt.Sprintf("job %q index 0", id), turnState(id, 0, n+1), got[0])
		checkState(t, fmt.Sprintf("job %q index %d", id, n+1), finalTurnState(id, n+1, n+1), got[n+1])
	}
}

// testIndexes: every index comes back as itself, the zero one and large
// ones included, with no index lost or added.
func testIndexes(t testing.TB, c batchagent.Checkpointer) {
	indexes := []int{0, 1, 2, 7, 63, 64, 1000, 99_999, math.MaxInt32, math.MaxInt}
	for i, idx := range indexes {
		if i%2 == 0 {
			save(t, c, turnState("job", idx, 1))
		} else {
			save(t, c, finalTurnState("job", idx, 2))
		}
	}
	got := load(t, c, "job")
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, indexes) {
		t.Fatalf("Load returned indexes %v, want %v", keys, indexes)
	}
	for i, idx := range indexes {
		want := turnState("job", idx, 1)
		if i%2 == 1 {
			want = finalTurnState("job", idx, 2)
		}
		checkState(t, describe(want), want, got[idx])
	}
}

// testLargeStates: states of over a megabyte each (long tool results), more
// than 4 MB together, come back whole, saved at once with small ones.
func testLargeStates(t testing.TB, c batchagent.Checkpointer) {
	big := func(st agent.State, n int) agent.State {
		st.Messages = append(st.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: "call_big", Name: "read_file",
			Content: strings.Repeat(fmt.Sprintf("line %d of a long file <&> é\n", n), 50_000)})
		return st
	}
	want := []agent.State{big(runningState("job", 0), 0), big(doneState("job", 1), 1), big(failedState("job", 2), 2)}
	var wg sync.WaitGroup
	errs := make([]error, len(want)+8)
	for i, st := range want {
		wg.Go(func() { errs[i] = c.Save(ctxOf(t), st) })
	}
	for i := range 8 { // small states in the same commits
		wg.Go(func() { errs[len(want)+i] = c.Save(ctxOf(t), finalTurnState("job", 10+i, 1)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Save %d of a batch with states of several MB = %v, want nil", i, err)
		}
	}
	got := load(t, c, "job")
	if len(got) != len(want)+8 {
		t.Errorf("Load = %d states, want %d", len(got), len(want)+8)
	}
	for _, st := range want {
		checkState(t, describe(st)+" of several MB", st, got[st.Index])
	}
	for i := range 8 {
		checkState(t, "small state saved with large ones", finalTurnState("job", 10+i, 1), got[10+i])
	}
}

// testCallerOwnsState: Save must not keep what the state refers to; the
// caller may change its messages, input, output and problems once Save
// has returned.
func testCallerOwnsState(t testing.TB, c batchagent.Checkpointer) {
	running, failed := runningState("job", 0), failedState("job", 1)
	save(t, c, running)
	save(t, c, failed)
	running.Messages[0].Content = "changed"
	running.Messages[1].ToolCalls[0].Arguments[2] = 'X'
	running.Input["id"] = json.Number("-1")
	running.Input["list"].([]any)[1] = "changed"
	failed.Failure.Problems[0].Message = "changed"
	failed.Failure.Cause[0].Message = "changed"
	done := doneState("job", 2)
	save(t, c, done)
	done.Output[2] = 'X'
	got := load(t, c, "job")
	checkState(t, "running state changed by the caller after Save", runningState("job", 0), got[0])
	checkState(t, "failed state changed by the caller after Save", failedState("job", 1), got[1])
	checkState(t, "done state changed by the caller after Save", doneState("job", 2), got[2])
}

// Sizes of testConcurrentSaves.
const (
	concurrentAgents = 64
	concurrentTurns  = 8
)

// testConcurrentSaves: agents of two jobs save turn after turn and then
// their final state, each from its own goroutine, while other goroutines
// Load: every Save succeeds, every loaded state is one that was saved,
// whole, never older than a Save that had returned before the Load began,
// and in the end every agent's final state is loaded.
func testConcurrentSaves(t testing.TB, c batchagent.Checkpointer) {
	ctx := ctxOf(t)
	jobs := []string{"a", "b"}
	var mu sync.Mutex // protects errs and acked
	var errs []string
	acked := map[string][]int{"a": make([]int, concurrentAgents), "b": make([]int, concurrentAgents)}
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	var savers, loaders sync.WaitGroup
	stop := make(chan struct{})
	for _, jobID := range jobs {
		for idx := range concurrentAgents {
			savers.Go(func() {
				for turns := 1; turns <= concurrentTurns; turns++ {
					st := turnState(jobID, idx, turns)
					if turns == concurrentTurns {
						st = finalTurnState(jobID, idx, turns)
					}
					if err := c.Save(ctx, st); err != nil {
						report("Save(%s) = %v", describe(st), err)
						return
					}
					mu.Lock()
					acked[jobID][idx] = turns
					mu.Unlock()
				}
			})
		}
		loaders.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				before := slices.Clone(acked[jobID])
				mu.Unlock()
				states, err := c.Load(ctx, jobID)
				if err != nil {
					report("Load(%q) during saves = %v", jobID, err)
					return
				}
				for _, st := range states {
					if st.Index < 0 || st.Index >= concurrentAgents || st.JobID != jobID {
						report("Load(%q) during saves returned %s, which was never saved", jobID, describe(st))
						continue
					}
					want := turnState(jobID, st.Index, st.Turns)
					if st.Status != agent.StatusRunning {
						want = finalTurnState(jobID, st.Index, st.Turns)
					}
					if diff := cmp.Diff(want, st, stateOpts, cmpIgnoreFinalMessages(st)); diff != "" {
						report("Load(%q) during saves returned %s, not a saved state (-saved +loaded):\n%s", jobID, describe(st), diff)
					}
					if st.Turns < before[st.Index] {
						report("Load(%q) returned index %d at turn %d, but the Save of turn %d had returned before Load began", jobID, st.Index, st.Turns, before[st.Index])
					}
				}
			}
		})
	}
	savers.Wait()
	close(stop)
	loaders.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	for _, jobID := range jobs {
		got := load(t, c, jobID)
		if len(got) != concurrentAgents {
			t.Errorf("after concurrent saves Load(%q) = %d states, want %d", jobID, len(got), concurrentAgents)
		}
		for idx := range concurrentAgents {
			checkState(t, fmt.Sprintf("after concurrent saves job %q index %d", jobID, idx), finalTurnState(jobID, idx, concurrentTurns), got[idx])
		}
	}
}

// cmpIgnoreFinalMessages ignores Messages when st is a final state that
// came without them.
func cmpIgnoreFinalMessages(st agent.State) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		return st.Status != agent.StatusRunning && st.Messages == nil && p.Last().String() == ".Messages"
	}, cmp.Ignore())
}

// testCancelledContext: Save and Load with a cancelled context return at
// once; an error they return wraps the context's; a Save that returned nil
// is durable all the same; and the Checkpointer stays usable.
func testCancelledContext(t testing.TB, c batchagent.Checkpointer) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	st := turnState("job", 0, 1)
	saveErr, ok := within(func() error { return c.Save(ctx, st) })
	if !ok {
		t.Fatalf("Save with a cancelled context did not return within %v", callTimeout)
	}
	if saveErr != nil && !errors.Is(saveErr, context.Canceled) {
		t.Errorf("Save with a cancelled context = %v, want nil or an error wrapping context.Canceled", saveErr)
	}
	type loaded struct {
		states []agent.State
		err    error
	}
	ld, ok := within(func() loaded {
		states, err := c.Load(ctx, "job")
		return loaded{states, err}
	})
	if !ok {
		t.Fatalf("Load with a cancelled context did not return within %v", callTimeout)
	}
	switch {
	case ld.err != nil && !errors.Is(ld.err, context.Canceled):
		t.Errorf("Load with a cancelled context = %v, want nil or an error wrapping context.Canceled", ld.err)
	case ld.err == nil && saveErr == nil && len(ld.states) != 1:
		t.Errorf("Load with a cancelled context = %d states, nil after a Save that returned nil; want the state, or an error", len(ld.states))
	}
	got := load(t, c, "job")
	if saved, ok := got[0]; saveErr == nil && !ok {
		t.Errorf("Save with a cancelled context returned nil, but the state was not loaded: nil must mean durable")
	} else if ok {
		checkState(t, "state saved with a cancelled context", st, saved)
	}
	// Still usable.
	next := turnState("job", 0, 2)
	save(t, c, next)
	checkState(t, "state saved after a cancelled Save", next, loadOne(t, c, "job", 0))
}

// within runs f and returns what it returns, or false when it did not
// return within callTimeout. f's goroutine is then left to end on its own.
func within[T any](f func() T) (T, bool) {
	done := make(chan T, 1) // f's goroutine never blocks on it
	go func() { done <- f() }()
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	select {
	case v := <-done:
		return v, true
	case <-timer.C:
		var zero T
		return zero, false
	}
}

// testSaveAsync, when the Checkpointer has SaveAsync: done is called
// exactly once per state; a state whose done got nil is loaded; SaveAsync
// after Save of the same index replaces it, and Save after SaveAsync
// (once done) replaces that; SaveAsync calls from many goroutines are all
// saved.
func testSaveAsync(t testing.TB, c batchagent.Checkpointer) {
	as, ok := c.(AsyncSaver)
	if !ok {
		t.Skip("the Checkpointer has no SaveAsync")
	}
	const n = 200
	var calls [n]int32
	var mu sync.Mutex // protects calls and errs
	var errs []error
	var wg sync.WaitGroup
	wg.Add(n)
	for idx := range n {
		// Every agent first saves a turn synchronously, as the engine does
		// before its final state.
		save(t, c, turnState("job", idx, 1))
	}
	var start sync.WaitGroup
	for idx := range n {
		start.Go(func() {
			st := finalTurnState("job", idx, 2)
			as.SaveAsync(&st, func(err error) {
				mu.Lock()
				calls[idx]++
				if calls[idx] == 1 {
					wg.Done()
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("index %d: %w", idx, err))
				}
				mu.Unlock()
			})
		})
	}
	start.Wait()
	if _, ok := within(func() struct{} { wg.Wait(); return struct{}{} }); !ok {
		mu.Lock()
		var missing []int
		for idx, k := range calls {
			if k == 0 {
				missing = append(missing, idx)
			}
		}
		mu.Unlock()
		t.Fatalf("SaveAsync: done not called within %v for indexes %v", callTimeout, missing)
	}
	mu.Lock()
	for _, err := range errs {
		t.Errorf("SaveAsync: done(%v), want nil", err)
	}
	mu.Unlock()
	got := load(t, c, "job")
	for idx := range n {
		checkState(t, fmt.Sprintf("SaveAsync of index %d, done", idx), finalTurnState("job", idx, 2), got[idx])
	}
	// Save after SaveAsync replaces it.
	save(t, c, turnState("job", 0, 3))
	checkState(t, "Save after SaveAsync", turnState("job", 0, 3), load(t, c, "job")[0])
	mu.Lock()
	for idx, k := range calls {
		if k != 1 {
			t.Errorf("SaveAsync of index %d: done called %d times, want exactly once", idx, k)
		}
	}
	mu.Unlock()
}
