package batchagent_test

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// fakeCheckpointer keeps states in memory.
type fakeCheckpointer struct {
	mu     sync.Mutex
	states map[int]agent.State
	saves  int
}

func (f *fakeCheckpointer) Save(ctx context.Context, s agent.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.states == nil {
		f.states = map[int]agent.State{}
	}
	f.states[s.Index] = *s.Clone()
	f.saves++
	return nil
}

func (f *fakeCheckpointer) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []agent.State
	for _, k := range slices.Sorted(maps.Keys(f.states)) {
		st := f.states[k]
		out = append(out, *st.Clone())
	}
	return out, nil
}

// checkpointDef returns the job of the checkpoint tests, "ck", on m: one
// tool turn, then an answer.
func checkpointDef(m *sim.Model) batchagent.Def {
	echo := tool.Func(tool.Spec{Name: "read_file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) { return "contents", nil })
	return batchagent.Def{
		ID: "ck", Model: m, Task: "read path: {id}.txt", Tools: []tool.Tool{echo},
		OutputSchema: json.RawMessage(outSchema),
	}
}

func outputs(res []batchagent.Result) []string {
	var s []string
	for _, r := range res {
		s = append(s, string(r.Output))
	}
	return s
}

func TestCheckpointResume(t *testing.T) {
	ck := &fakeCheckpointer{}
	first := newSim(t, sim.Config{Seed: 9})
	_, res := runWith(t, batchagent.Config{Checkpoint: ck}, checkpointDef(first), batchagent.Slice(inputs(20)))
	want := outputs(res)
	// One save after the tool turn, one for the result.
	if ck.saves != 40 || first.Stats().Calls != 40 {
		t.Fatalf("saves %d, model calls %d; want 40 and 40", ck.saves, first.Stats().Calls)
	}
	for i, st := range ck.states {
		if st.Status != agent.StatusDone || st.JobID != "ck" || st.Input["id"] == nil {
			t.Fatalf("state %d = status %q job %q input %v; want done, ck and the input", i, st.Status, st.JobID, st.Input)
		}
	}

	// Everything done: a second run calls no model and returns the same.
	again := newSim(t, sim.Config{Seed: 9})
	e2, res2 := runWith(t, batchagent.Config{Checkpoint: ck}, checkpointDef(again), batchagent.Slice(inputs(20)))
	if again.Stats().Calls != 0 {
		t.Errorf("resuming a finished run made %d model calls, want 0", again.Stats().Calls)
	}
	// The engine's counters say what it did: it restored 20 results and
	// did no work.
	if st := e2.Stats(); st.Done != 20 || st.OK != 20 || st.Restored != 20 || st.ModelCalls != 0 || st.Turns != 0 ||
		st.ToolCalls != 0 || st.Usage != (llm.Usage{}) {
		t.Errorf("stats of a resumed finished run: done %d ok %d restored %d model calls %d turns %d tool calls %d usage %+v; want 20 20 20 0 0 0 zero",
			st.Done, st.OK, st.Restored, st.ModelCalls, st.Turns, st.ToolCalls, st.Usage)
	}
	if diff := gocmp.Diff(want, outputs(res2)); diff != "" {
		t.Errorf("resumed outputs (-want +got):\n%s", diff)
	}

	// Cut the even agents back to their first completed turn, as a kill
	// right after it would leave them: each resumes with one model call.
	for i := 0; i < 20; i += 2 {
		st := ck.states[i]
		st.Status, st.Output, st.Turns, st.Messages = agent.StatusRunning, nil, 1, st.Messages[:3]
		ck.states[i] = st
	}
	third := newSim(t, sim.Config{Seed: 9})
	e3, res3 := runWith(t, batchagent.Config{Checkpoint: ck}, checkpointDef(third), batchagent.Slice(inputs(20)))
	if third.Stats().Calls != 10 {
		t.Errorf("resuming 10 agents after their first turn made %d model calls, want 10", third.Stats().Calls)
	}
	// Counted: the 10 final turns run now, not the resumed agents' first
	// turns (with their tool calls) nor the 10 restored results.
	// The resumed agents' saved usage was that of both turns of the first
	// run, so each result's usage grew by its redone turn's tokens.
	var usage llm.Usage
	for i := 0; i < 20; i += 2 {
		u, before := res3[i].Usage, res[i].Usage
		usage = usage.Add(llm.Usage{PromptTokens: u.PromptTokens - before.PromptTokens,
			CompletionTokens: u.CompletionTokens - before.CompletionTokens, CachedTokens: u.CachedTokens - before.CachedTokens})
	}
	if st := e3.Stats(); st.Restored != 10 || st.ModelCalls != 10 || st.Turns != 10 || st.ToolCalls != 0 ||
		st.Usage != usage || usage.PromptTokens <= 0 {
		t.Errorf("stats after resuming mid-agent: restored %d model calls %d turns %d tool calls %d usage %+v; want 10 10 10 0 %+v (> 0)",
			st.Restored, st.ModelCalls, st.Turns, st.ToolCalls, st.Usage, usage)
	}
	if diff := gocmp.Diff(want, outputs(res3)); diff != "" {
		t.Errorf("outputs after resuming mid-agent (-want +got):\n%s", diff)
	}
}

func TestCheckpointRetryFailed(t *testing.T) {
	ck := &fakeCheckpointer{}
	d := checkpointDef(newSim(t, sim.Config{Seed: 2, InvalidRate: 1}))
	d.NoRetries = true
	cfg := batchagent.Config{Checkpoint: ck}
	_, res := runWith(t, cfg, d, batchagent.Slice(inputs(3)))
	if batchagent.KindOf(res[0].Err) != batchagent.KindValidation || ck.states[0].Status != agent.StatusFailed || ck.states[0].Failure == nil || len(ck.states[0].Failure.Problems) == 0 {
		t.Fatalf("first run: %v, saved %+v; want a saved validation failure with problems", res[0].Err, ck.states[0].Status)
	}
	// Without RetryFailed the saved failure is returned as it was.
	d.Model = newSim(t, sim.Config{Seed: 2})
	_, res = runWith(t, cfg, d, batchagent.Slice(inputs(3)))
	ae, _ := res[0].Err.(*batchagent.AgentError)
	if ae == nil || ae.Kind != batchagent.KindValidation || len(ae.Problems()) == 0 {
		t.Errorf("resumed failure = %v, want the saved validation error with its problems", res[0].Err)
	}
	// With RetryFailed they run again, and now succeed.
	cfg.RetryFailed = true
	_, res = runWith(t, cfg, d, batchagent.Slice(inputs(3)))
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("retried result %d: %v", r.Index, r.Err)
		}
	}
}

// TestDrainFinishesTurnsInFlight drains a run mid-way: no new input
// starts, agents stop before their next turn with that turn checkpointed,
// and a resumed run finishes with the same outputs.
func TestDrainFinishesTurnsInFlight(t *testing.T) {
	// In a bubble, the simulator's seeded latencies play out on the fake
	// clock, so which agents are between turns at the drain does not
	// depend on the machine's load.
	synctest.Test(t, func(t *testing.T) {
		ck := &fakeCheckpointer{}
		_, fresh := runWith(t, batchagent.Config{Checkpoint: &fakeCheckpointer{}}, checkpointDef(newSim(t, sim.Config{Seed: 9})), batchagent.Slice(inputs(30)))
		want := outputs(fresh)
		// Jitter staggers the agents, so that some are between turns when the
		// run is drained.
		m := newSim(t, sim.Config{Seed: 9, Latency: 20 * time.Millisecond, Jitter: 0.9})
		e := newEngine(t, batchagent.Config{Checkpoint: ck, MaxActive: 8})
		seq, err := e.Stream(t.Context(), mustSpec(t, checkpointDef(m)), batchagent.Slice(inputs(30)))
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		var res []batchagent.Result
		for r := range seq {
			once.Do(e.Drain)
			res = append(res, r)
		}
		var canceled int
		for _, r := range res {
			if batchagent.KindOf(r.Err) == batchagent.KindCanceled {
				canceled++
			} else if r.Err != nil {
				t.Errorf("result %d: %v", r.Index, r.Err)
			}
		}
		if len(res) >= 30 || canceled == 0 {
			t.Fatalf("drained run yielded %d results (%d canceled), want fewer than 30 with some stopped agents", len(res), canceled)
		}
		for _, st := range ck.states {
			if st.Status == agent.StatusRunning && st.Turns != 1 {
				t.Errorf("stopped agent %d saved at turn %d, want its completed first turn", st.Index, st.Turns)
			}
		}
		_, resumed := runWith(t, batchagent.Config{Checkpoint: ck}, checkpointDef(newSim(t, sim.Config{Seed: 9})), batchagent.Slice(inputs(30)))
		if diff := gocmp.Diff(want, outputs(resumed)); diff != "" {
			t.Errorf("outputs after resuming a drained run (-want +got):\n%s", diff)
		}
	})
}

// TestResultDeliveredOnlyWhenDurable runs agents against a real store
// whose file another connection keeps locked for a while: no result may
// reach the caller before its final state is committed, and each one that
// does must already be visible to a second connection.
func TestResultDeliveredOnlyWhenDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.db")
	store, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reader, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()

	// Hold the write lock: every commit waits (up to the busy timeout).
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	unlock := time.AfterFunc(300*time.Millisecond, func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Errorf("ROLLBACK = %v", err)
		}
	})
	defer unlock.Stop()

	e := newEngine(t, batchagent.Config{Checkpoint: store})
	spec := mustSpec(t, checkpointDef(newSim(t, sim.Config{Seed: 3})))
	start := time.Now()
	n := 0
	results, err := e.Stream(t.Context(), spec, batchagent.Slice(inputs(30)))
	if err != nil {
		t.Fatal(err)
	}
	for r := range results {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
		if since := time.Since(start); since < 300*time.Millisecond {
			t.Fatalf("result %d delivered after %v, while the store could not commit", r.Index, since)
		}
		states, err := reader.Load(t.Context(), "ck")
		if err != nil {
			t.Fatal(err)
		}
		i, found := slices.BinarySearchFunc(states, r.Index, func(s agent.State, idx int) int { return cmp.Compare(s.Index, idx) })
		if !found || states[i].Status != agent.StatusDone || string(states[i].Output) != string(r.Output) {
			t.Fatalf("result %d delivered but its stored state is %+v (found %v)", r.Index, states[min(i, len(states)-1)].Status, found)
		}
		n++
	}
	if n != 30 {
		t.Errorf("%d results, want 30", n)
	}
}

// TestCheckpointLoadFails damages the store's file: every input then fails
// with the load's own error, and nothing runs from scratch.
func TestCheckpointLoadFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.db")
	store, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := newSim(t, sim.Config{Seed: 3})
	runWith(t, batchagent.Config{Checkpoint: store}, checkpointDef(m), batchagent.Slice(inputs(3)))
	store.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE finished SET states = x'00'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	store, err = checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	again := newSim(t, sim.Config{Seed: 3})
	_, res := runWith(t, batchagent.Config{Checkpoint: store}, checkpointDef(again), batchagent.Slice(inputs(3)))
	if len(res) != 3 {
		t.Fatalf("Run returned %d results, want 3", len(res))
	}
	for i, r := range res {
		if r.Index != i || r.Output != nil || batchagent.KindOf(r.Err) != batchagent.KindBackend {
			t.Errorf("result %d: index %d output %s kind %q, want index %d, no output and a backend failure", i, r.Index, r.Output, batchagent.KindOf(r.Err), i)
		}
		if r.Err == nil || !strings.Contains(r.Err.Error(), "load checkpoint: checkpoint: load job \"ck\": segment") {
			t.Errorf("result %d: %v; want the load's error", r.Index, r.Err)
		}
	}
	if again.Stats().Calls != 0 {
		t.Errorf("%d model calls after a failed load, want 0", again.Stats().Calls)
	}
}

// TestFailedFinalTurnSavedOnce runs agents whose every answer is invalid
// and that get no correction: each is saved once, as failed, not first as
// running and then as failed.
func TestFailedFinalTurnSavedOnce(t *testing.T) {
	ck := &fakeCheckpointer{}
	_, res := runWith(t, batchagent.Config{Checkpoint: ck}, batchagent.Def{ID: "ck", Model: newSim(t, sim.Config{Seed: 1, InvalidRate: 1, ToolTurns: -1}),
		Task: "{id}", OutputSchema: json.RawMessage(outSchema), NoRetries: true}, batchagent.Slice(inputs(4)))
	for _, r := range res {
		if batchagent.KindOf(r.Err) != batchagent.KindValidation {
			t.Fatalf("result %d: %v, want a validation failure", r.Index, r.Err)
		}
	}
	if ck.saves != 4 {
		t.Errorf("%d saves for 4 one-turn failed agents, want 4", ck.saves)
	}
	for i, st := range ck.states {
		if st.Status != agent.StatusFailed || st.Turns != 1 {
			t.Errorf("state %d: status %s turns %d, want failed after 1 turn", i, st.Status, st.Turns)
		}
	}
}

// failingSaver is a Checkpointer whose saves all fail.
type failingSaver struct{ fakeCheckpointer }

func (*failingSaver) Save(context.Context, agent.State) error { return errors.New("disk full") }

// TestCheckpointErrorsCounted checks that failed saves show in Stats: with
// the default logger they would otherwise go unseen.
func TestCheckpointErrorsCounted(t *testing.T) {
	e, res := runWith(t, batchagent.Config{Checkpoint: &failingSaver{}}, checkpointDef(newSim(t, sim.Config{Seed: 2})), batchagent.Slice(inputs(5)))
	// Two saves per agent: after the tool turn, and the final state.
	if st := e.Stats(); st.OK != 5 || st.CheckpointErrors != 10 {
		t.Errorf("ok %d, checkpoint errors %d; want 5 and 10 (%d results)", st.OK, st.CheckpointErrors, len(res))
	}
}
