package checkpoint_test

import (
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
)

// TestForget discards the states of two agents (one finished, one
// running): Load, State and Summary no longer see them, other jobs and
// agents keep theirs, and a state saved afterwards is seen again.
func TestForget(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	ctx := t.Context()
	running := fullState("j", 2)
	running.Status, running.Output = agent.StatusRunning, nil
	states := []agent.State{fullState("j", 0), fullState("j", 1), running, fullState("other", 1)}
	for _, st := range states {
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Forget(ctx, "j", []int{1, 2}); err != nil {
		t.Fatalf("Forget = %v", err)
	}
	checkStates(t, s, "j", states[0])
	checkStates(t, s, "other", states[3])
	if sm, err := s.Summary(ctx, "j"); err != nil || sm.Total() != 1 {
		t.Errorf("Summary after Forget: %d states, %v; want 1", sm.Total(), err)
	}
	again := agent.State{JobID: "j", Index: 1, Status: agent.StatusRunning, Messages: []llm.Message{{Role: llm.RoleUser, Content: "new"}}}
	if err := s.Save(ctx, again); err != nil {
		t.Fatal(err)
	}
	checkStates(t, s, "j", states[0], again)
	// Kept across a reopen.
	s2, _ := reopen(t, path)
	checkStates(t, s2, "j", states[0], again)
}

// TestFormat3Upgraded opens a file of format 3 (no table forgotten): it
// is upgraded in place, keeps its states, and Forget works.
func TestFormat3Upgraded(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	ctx := t.Context()
	if err := s.Save(ctx, fullState("j", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execSQL(t, path, `DROP TABLE forgotten; PRAGMA user_version = 3`)
	s2, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open(format 3 file) = %v", err)
	}
	defer s2.Close()
	if v := query[int](t, path, `PRAGMA user_version`); v != 5 {
		t.Errorf("user_version after the upgrade = %d, want 5", v)
	}
	checkStates(t, s2, "j", fullState("j", 3))
	if err := s2.Forget(ctx, "j", []int{3}); err != nil {
		t.Fatalf("Forget after the upgrade = %v", err)
	}
	checkStates(t, s2, "j")
}

// TestFormat3ReadOnly reads a file of format 3 read-only, as `batchagent
// status` does: it is read as it is, not upgraded.
func TestFormat3ReadOnly(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	if err := s.Save(t.Context(), fullState("j", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execSQL(t, path, `DROP TABLE forgotten; PRAGMA user_version = 3`)
	r, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly(format 3 file) = %v", err)
	}
	defer r.Close()
	checkStates(t, r, "j", fullState("j", 3))
	if v := query[int](t, path, `PRAGMA user_version`); v != 3 {
		t.Errorf("user_version after a read-only open = %d, want 3", v)
	}
}
