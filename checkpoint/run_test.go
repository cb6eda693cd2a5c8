package checkpoint_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

func TestBegin(t *testing.T) {
	base := checkpoint.Fingerprint{"task": "t1", "system": "s1", "schema": "c1", "model": "m1"}
	tests := []struct {
		name        string
		fp          checkpoint.Fingerprint
		force       bool
		wantChanged []string // nil: accepted
		wantMsg     string
		wantStored  checkpoint.Fingerprint // what a later Begin must match
	}{
		{name: "same fingerprint", fp: base, wantStored: base},
		{
			name:        "changed parts",
			fp:          checkpoint.Fingerprint{"task": "t2", "system": "s1", "schema": "c2", "model": "m1"},
			wantChanged: []string{"schema", "task"},
			wantMsg:     `checkpoint: job "j" changed since its last run: schema, task`,
			wantStored:  base,
		},
		{
			name:        "added and removed parts",
			fp:          checkpoint.Fingerprint{"task": "t1", "system": "s1", "schema": "c1", "tools": "x"},
			wantChanged: []string{"model", "tools"},
			wantMsg:     `checkpoint: job "j" changed since its last run: model, tools`,
			wantStored:  base,
		},
		{
			name:       "force replaces",
			fp:         checkpoint.Fingerprint{"task": "t2", "system": "s1", "schema": "c1", "model": "m1"},
			force:      true,
			wantStored: checkpoint.Fingerprint{"task": "t2", "system": "s1", "schema": "c1", "model": "m1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := open(t, checkpoint.Config{})
			ctx := t.Context()
			existed, err := s.Begin(ctx, "j", base, false)
			if err != nil || existed {
				t.Fatalf("Begin(new run) = %v, %v; want false, nil", existed, err)
			}
			existed, err = s.Begin(ctx, "j", tt.fp, tt.force)
			if !existed {
				t.Errorf("Begin(existing run) existed = false, want true")
			}
			if tt.wantChanged == nil {
				if err != nil {
					t.Fatalf("Begin(%v, force=%v) = %v, want nil", tt.fp, tt.force, err)
				}
			} else {
				var me *checkpoint.MismatchError
				if !errors.As(err, &me) {
					t.Fatalf("Begin(%v) = %v, want a *MismatchError", tt.fp, err)
				}
				if diff := cmp.Diff(&checkpoint.MismatchError{JobID: "j", Changed: tt.wantChanged}, me); diff != "" {
					t.Errorf("Begin(%v) error mismatch (-want +got):\n%s", tt.fp, diff)
				}
				if got := err.Error(); got != tt.wantMsg {
					t.Errorf("Begin(%v).Error() = %q, want %q", tt.fp, got, tt.wantMsg)
				}
			}
			// The stored fingerprint is wantStored: it matches exactly.
			if _, err := s.Begin(ctx, "j", tt.wantStored, false); err != nil {
				t.Errorf("Begin(stored fingerprint %v) = %v, want nil", tt.wantStored, err)
			}
		})
	}
}

func TestBeginJobsAreSeparate(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	ctx := t.Context()
	for _, id := range []string{"b", "a"} {
		if existed, err := s.Begin(ctx, id, checkpoint.Fingerprint{"task": id}, false); err != nil || existed {
			t.Fatalf("Begin(%q) = %v, %v; want false, nil", id, existed, err)
		}
	}
	if err := s.Save(ctx, agent.State{JobID: "c", Index: 0, Status: agent.StatusDone}); err != nil {
		t.Fatalf("Save(c) = %v", err)
	}
	got, err := s.Jobs(ctx)
	if err != nil {
		t.Fatalf("Jobs() = %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("Jobs() mismatch (-want +got):\n%s", diff)
	}
}

func TestSummary(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	ctx := t.Context()
	before := time.Now()
	if _, err := s.Begin(ctx, "j", checkpoint.Fingerprint{"task": "x"}, false); err != nil {
		t.Fatalf("Begin = %v", err)
	}
	states := []agent.State{
		{Index: 0, Status: agent.StatusDone, Turns: 2, ModelCalls: 3, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5}},
		{Index: 1, Status: agent.StatusDone, Turns: 1, ModelCalls: 1, Usage: llm.Usage{PromptTokens: 20, CompletionTokens: 7, CachedTokens: 8}},
		{Index: 2, Status: agent.StatusFailed, Failure: &job.Failure{Kind: "rate_limited"}, Turns: 0, ModelCalls: 4},
		{Index: 3, Status: agent.StatusFailed, Failure: &job.Failure{Kind: "validation"}, Turns: 3, ModelCalls: 3, Usage: llm.Usage{PromptTokens: 1}},
		{Index: 4, Status: agent.StatusFailed, Failure: &job.Failure{Kind: "validation"}, Turns: 3, ModelCalls: 3},
		{Index: 5, Status: agent.StatusRunning, Turns: 1, ModelCalls: 1},
	}
	for _, st := range states {
		st.JobID = "j"
		if err := s.Save(ctx, st); err != nil {
			t.Fatalf("Save(%d) = %v", st.Index, err)
		}
	}
	// Another job's states are not counted.
	if err := s.Save(ctx, agent.State{JobID: "k", Status: agent.StatusDone, Turns: 9}); err != nil {
		t.Fatalf("Save(k) = %v", err)
	}
	after := time.Now()

	got, err := s.Summary(ctx, "j")
	if err != nil {
		t.Fatalf("Summary(j) = %v", err)
	}
	want := checkpoint.Summary{
		JobID:      "j",
		ByStatus:   map[agent.Status]int{agent.StatusDone: 2, agent.StatusFailed: 3, agent.StatusRunning: 1},
		ByKind:     map[string]int{"rate_limited": 1, "validation": 2},
		Usage:      llm.Usage{PromptTokens: 31, CompletionTokens: 12, CachedTokens: 8},
		Turns:      10,
		ModelCalls: 15,
		Inputs:     -1,
	}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool {
		return p.String() == "First" || p.String() == "Last"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("Summary(j) mismatch (-want +got):\n%s", diff)
	}
	if got.Total() != 6 {
		t.Errorf("Summary(j).Total() = %d, want 6", got.Total())
	}
	if got.First.Before(before) || got.Last.Before(got.First) || got.Last.After(after) {
		t.Errorf("Summary(j) First, Last = %v, %v; want within [%v, %v], First ≤ Last", got.First, got.Last, before, after)
	}

	if got.Pending() != -1 {
		t.Errorf("Pending() before SetInputs = %d, want -1 (unknown)", got.Pending())
	}
	// With the number of inputs recorded, those without a state are
	// pending.
	if err := s.SetInputs(ctx, "j", 10); err != nil {
		t.Fatalf("SetInputs(j, 10) = %v", err)
	}
	if got, err = s.Summary(ctx, "j"); err != nil || got.Inputs != 10 || got.Pending() != 4 {
		t.Errorf("Summary after SetInputs(j, 10): inputs %d, pending %d, err %v; want 10, 4", got.Inputs, got.Pending(), err)
	}
	if err := s.SetInputs(ctx, "j", -1); err != nil {
		t.Fatalf("SetInputs(j, -1) = %v", err)
	}
	if got, _ = s.Summary(ctx, "j"); got.Inputs != -1 {
		t.Errorf("Summary after SetInputs(j, -1): inputs %d, want -1", got.Inputs)
	}
	if err := s.SetInputs(ctx, "k", 1); !errors.Is(err, checkpoint.ErrUnknownJob) {
		t.Errorf("SetInputs of a job never begun = %v, want %v", err, checkpoint.ErrUnknownJob)
	}

	if _, err := s.Summary(ctx, "nope"); !errors.Is(err, checkpoint.ErrUnknownJob) {
		t.Errorf("Summary(nope) = %v, want %v", err, checkpoint.ErrUnknownJob)
	}
}

// TestBeginForceDiscardsStaleStates forces a run whose job changed: the
// states saved by the old job (final and in progress) are stale, made by
// another job, and Load no longer returns them; a forced Begin of an
// unchanged job, or of one whose backend alone changed, keeps them, and
// states saved after the forced Begin are loaded as usual.
func TestBeginForceDiscardsStaleStates(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	ctx := t.Context()
	old := checkpoint.Fingerprint{"task": "t1", "model": "m1"}
	if _, err := s.Begin(ctx, "j", old, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ctx, "other", old, false); err != nil {
		t.Fatal(err)
	}
	for _, st := range []agent.State{
		{JobID: "j", Index: 0, Status: agent.StatusDone, Output: []byte(`{"v":0}`)},
		{JobID: "j", Index: 1, Status: agent.StatusFailed, Failure: &job.Failure{Kind: "timeout", Cause: []job.Link{{Message: "slow"}}}},
		{JobID: "j", Index: 2, Status: agent.StatusRunning, Turns: 1},
		{JobID: "other", Index: 0, Status: agent.StatusDone, Output: []byte(`{"v":9}`)},
	} {
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	indexes := func(job string) []int {
		t.Helper()
		states, err := s.Load(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		for _, st := range states {
			idx = append(idx, st.Index)
		}
		return idx
	}
	if _, err := s.Begin(ctx, "j", old, true); err != nil {
		t.Fatal(err)
	}
	if got := indexes("j"); !cmp.Equal(got, []int{0, 1, 2}) {
		t.Errorf("after a forced Begin of the same job, Load = indexes %v, want [0 1 2]", got)
	}
	moved := checkpoint.Fingerprint{"task": "t1", "model": "m1", checkpoint.BackendPart: "b2"}
	if _, err := s.Begin(ctx, "j", moved, true); err != nil {
		t.Fatal(err)
	}
	if got := indexes("j"); !cmp.Equal(got, []int{0, 1, 2}) {
		t.Errorf("after a forced Begin with another backend only, Load = indexes %v, want [0 1 2]: the same job made them", got)
	}
	edited := checkpoint.Fingerprint{"task": "t2", "model": "m1", checkpoint.BackendPart: "b2"}
	if existed, err := s.Begin(ctx, "j", edited, true); err != nil || !existed {
		t.Fatalf("Begin(edited, force) = %v, %v; want true, nil", existed, err)
	}
	if got := indexes("j"); len(got) != 0 {
		t.Errorf("after a forced Begin of an edited job, Load = indexes %v, want none: they were made by the old job", got)
	}
	if got := indexes("other"); !cmp.Equal(got, []int{0}) {
		t.Errorf("Load(other job) = indexes %v, want [0]: only the forced job's states go", got)
	}
	if err := s.Save(ctx, agent.State{JobID: "j", Index: 1, Status: agent.StatusDone, Output: []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	if got := indexes("j"); !cmp.Equal(got, []int{1}) {
		t.Errorf("Load after a new save = indexes %v, want [1]", got)
	}
	sum, err := s.Summary(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if sum.ByStatus[agent.StatusDone] != 1 || sum.ByStatus[agent.StatusFailed] != 0 || sum.ByStatus[agent.StatusRunning] != 0 {
		t.Errorf("Summary after the forced Begin = %v, want 1 done only", sum.ByStatus)
	}
}
