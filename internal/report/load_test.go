package report_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/llm"
)

// writeStore saves states of job "j" into a new store and returns its
// path, closed.
func writeStore(t *testing.T, states ...agent.State) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.db")
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := st.Begin(ctx, "j", checkpoint.Fingerprint{"task": "x"}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.SetInputs(ctx, "j", 5); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		s.JobID = "j"
		if err := st.Save(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadStates(t *testing.T) {
	t.Parallel()
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "task"}}
	path := writeStore(t,
		agent.State{Index: 2, Status: agent.StatusFailed, ErrKind: "timeout", Messages: msgs, ModelCalls: 2, Usage: llm.Usage{PromptTokens: 10}},
		agent.State{Index: 0, Status: agent.StatusDone, Messages: msgs, ModelCalls: 1, Usage: llm.Usage{PromptTokens: 20, CompletionTokens: 5},
			Timings: agent.Timings{Total: time.Second, TTFT: 200 * time.Millisecond}},
		agent.State{Index: 1, Status: agent.StatusRunning, Messages: msgs, ModelCalls: 1},
	)
	store, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := report.Load(t.Context(), store, "j")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := report.Totals{Inputs: 5, Done: 2, OK: 1, Failed: 1, Running: 1, ByKind: map[string]int64{"timeout": 1},
		ModelCalls: 4, Usage: llm.Usage{PromptTokens: 30, CompletionTokens: 5}}
	if diff := cmp.Diff(want, d.Totals); diff != "" {
		t.Errorf("Load totals (-want +got):\n%s", diff)
	}
	var idx []int
	for _, a := range d.Agents {
		idx = append(idx, a.Index)
	}
	if diff := cmp.Diff([]int{0, 1, 2}, idx); diff != "" {
		t.Errorf("agents by index (-want +got):\n%s", diff)
	}
	if a := d.Agents[0]; a.Status != "done" || a.TTFT != 200*time.Millisecond || a.Total != time.Second {
		t.Errorf("agent 0 = %+v, want done with its timings", a)
	}
	if a := d.Agents[2]; a.Status != "failed" || a.Kind != "timeout" {
		t.Errorf("agent 2 = %+v, want failed by timeout", a)
	}
	if d.Info.Job != "j" || d.Start.IsZero() || !d.Done || len(d.Samples) != 0 {
		t.Errorf("Load = job %q from %v, done %v, %d samples; want job j, a start, done, no samples", d.Info.Job, d.Start, d.Done, len(d.Samples))
	}
}

func TestLoadUnknownJob(t *testing.T) {
	t.Parallel()
	store, err := checkpoint.OpenReadOnly(writeStore(t))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := report.Load(t.Context(), store, "other"); !errors.Is(err, checkpoint.ErrUnknownJob) {
		t.Errorf("Load(other) = %v, want ErrUnknownJob", err)
	}
}
