package batchagent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
)

// TestResumeRunsChangedInputsFresh resumes a checkpointed run with inputs
// edited and reordered: a saved state is used only for the input it was
// made from, every other input runs fresh, and the results are those of a
// fresh run on the new inputs.
func TestResumeRunsChangedInputsFresh(t *testing.T) {
	ck := &fakeCheckpointer{}
	runWith(t, batchagent.Config{Checkpoint: ck}, checkpointDef(newSim(t, sim.Config{Seed: 9})), batchagent.Slice(inputs(10)))
	// Half-run agent 4 too: its saved turn must not be resumed either.
	st := ck.states[4]
	st.Status, st.Output, st.Turns, st.Messages = agent.StatusRunning, nil, 1, st.Messages[:3]
	ck.states[4] = st

	changed := inputs(10)
	changed[2] = batchagent.Input{"id": "two"}               // edited
	changed[4] = batchagent.Input{"id": "four"}              // edited, with a running state
	changed[7], changed[8] = changed[8], changed[7]          // reordered
	changed = append(changed, batchagent.Input{"id": "new"}) // added at the end
	_, fresh := runWith(t, batchagent.Config{Checkpoint: &fakeCheckpointer{}}, checkpointDef(newSim(t, sim.Config{Seed: 9})), batchagent.Slice(changed))
	want := outputs(fresh)

	m := newSim(t, sim.Config{Seed: 9})
	e, res := runWith(t, batchagent.Config{Checkpoint: ck}, checkpointDef(m), batchagent.Slice(changed))
	for _, r := range res {
		if r.Err != nil || fmt.Sprint(r.Input) != fmt.Sprint(changed[r.Index]) {
			t.Errorf("result %d: input %v, err %v; want input %v, no error", r.Index, r.Input, r.Err, changed[r.Index])
		}
	}
	if diff := gocmp.Diff(want, outputs(res)); diff != "" {
		t.Errorf("outputs differ from a fresh run on the new inputs (-fresh +resumed):\n%s", diff)
	}
	// Inputs 2, 4, 7, 8 and 10 ran, two model calls each; 6 were restored.
	if st := e.Stats(); st.Restored != 6 || m.Stats().Calls != 10 {
		t.Errorf("restored %d, model calls %d; want 6 and 10", st.Restored, m.Stats().Calls)
	}
	for i, in := range changed {
		if got := ck.states[i].Input; fmt.Sprint(got) != fmt.Sprint(in) {
			t.Errorf("saved state %d has input %v, want %v", i, got, in)
		}
	}
}

// failAfter is a Checkpointer whose saves fail once ok of them have
// succeeded: a disk filling up.
type failAfter struct {
	fakeCheckpointer
	ok        int
	finalOnly bool // only saves of final states fail
}

func (f *failAfter) Save(ctx context.Context, s agent.State) error {
	f.mu.Lock()
	full := f.saves >= f.ok && (!f.finalOnly || s.Status != agent.StatusRunning)
	f.mu.Unlock()
	if full {
		return errors.New("disk full")
	}
	return f.fakeCheckpointer.Save(ctx, s)
}

// checkStopped checks the results of a run whose saves started failing
// under StopOnCheckpointError: every result delivered as an outcome has
// its final state saved, a result that reports ErrCheckpoint is canceled
// (with wantCkpt, there is one), and the run stopped early.
func checkStopped(t *testing.T, e *batchagent.Engine, res []batchagent.Result, wantCkpt bool, saved func(int) (agent.State, bool)) {
	t.Helper()
	var ok, ckptFailed, canceled int
	for _, r := range res {
		switch {
		case errors.Is(r.Err, batchagent.ErrCheckpoint):
			ckptFailed++
			if batchagent.KindOf(r.Err) != batchagent.KindCanceled || r.Output != nil {
				t.Errorf("result %d: kind %s, output %s; want canceled without output", r.Index, batchagent.KindOf(r.Err), r.Output)
			}
		case batchagent.KindOf(r.Err) == batchagent.KindCanceled:
			canceled++
		default:
			ok++
			if st, found := saved(r.Index); !found || st.Status == agent.StatusRunning {
				t.Errorf("result %d delivered (err %v) without its final state saved", r.Index, r.Err)
			}
		}
	}
	st := e.Stats()
	if (wantCkpt && ckptFailed == 0) || st.CheckpointErrors == 0 || canceled == 0 {
		t.Errorf("%d results wrap ErrCheckpoint, %d canceled, %d checkpoint errors; want > 0 canceled and errors (and results with ErrCheckpoint: %v)",
			ckptFailed, canceled, st.CheckpointErrors, wantCkpt)
	}
	t.Logf("%d ok, %d checkpoint failures, %d canceled; %d checkpoint errors", ok, ckptFailed, canceled, st.CheckpointErrors)
}

// TestStopOnCheckpointError fills the "disk" after 12 saves (of any
// state, or of final states only): the run stops, and no result is
// delivered whose final state was not saved.
func TestStopOnCheckpointError(t *testing.T) {
	for _, finalOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("finalOnly=%v", finalOnly), func(t *testing.T) {
			ck := &failAfter{ok: 12, finalOnly: finalOnly}
			e, res := runWith(t, batchagent.Config{Checkpoint: ck, StopOnCheckpointError: true, MaxActive: 4},
				checkpointDef(newSim(t, sim.Config{Seed: 2})), batchagent.Slice(inputs(100)))
			checkStopped(t, e, res, finalOnly, func(i int) (agent.State, bool) {
				ck.mu.Lock()
				defer ck.mu.Unlock()
				st, ok := ck.states[i]
				return st, ok
			})
		})
	}
}

// TestStopOnCheckpointErrorAsync closes a real store under a running
// engine, whose asynchronous saves then fail: the run stops, and no
// result is delivered whose final state was not saved.
func TestStopOnCheckpointErrorAsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.db")
	store, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	n := 0
	cfg := batchagent.Config{Checkpoint: store, StopOnCheckpointError: true, MaxActive: 4,
		OnResult: func(batchagent.Result) {
			if n++; n == 5 {
				once.Do(func() { _ = store.Close() })
			}
		}}
	e, res := runWith(t, cfg, checkpointDef(newSim(t, sim.Config{Seed: 2})), batchagent.Slice(inputs(100)))
	reopened, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	states, err := reopened.Load(t.Context(), "ck")
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[int]agent.State{}
	for _, st := range states {
		byIndex[st.Index] = st
	}
	checkStopped(t, e, res, false, func(i int) (agent.State, bool) { st, ok := byIndex[i]; return st, ok })
}
