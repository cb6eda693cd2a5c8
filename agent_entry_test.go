package batchagent_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
)

// TestAgentContinuesAcrossEngines: Engine.Agent runs one input at its own
// index under the job's ID; a second engine on the same checkpoint store
// (another worker) gets the finished agent's result back as saved, with
// no model call, and runs an unfinished index afresh.
func TestAgentContinuesAcrossEngines(t *testing.T) {
	store, err := checkpoint.Open(filepath.Join(t.TempDir(), "state.db"), checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m := newSim(t, sim.Config{Seed: 5, ToolTurns: -1})
	spec := mustSpec(t, batchagent.Def{ID: "run-1", Model: m, Task: "{id}", OutputSchema: json.RawMessage(outSchema)})

	first := newEngine(t, batchagent.Config{Checkpoint: store})
	r, err := first.Agent(t.Context(), spec, 41, batchagent.Input{"id": "41"}).Wait(t.Context())
	if err != nil || r.Err != nil || r.Index != 41 || r.ModelCalls != 1 {
		t.Fatalf("first engine: %+v, %v; want index 41 answered with one call", r, err)
	}

	second := newEngine(t, batchagent.Config{Checkpoint: store})
	again, err := second.Agent(t.Context(), spec, 41, batchagent.Input{"id": "41"}).Wait(t.Context())
	if err != nil || again.Err != nil || string(again.Output) != string(r.Output) {
		t.Fatalf("second engine: %s, %v, %v; want the saved %s", again.Output, again.Err, err, r.Output)
	}
	if st := second.Stats(); st.ModelCalls != 0 || st.Restored != 1 {
		t.Errorf("second engine: %d model calls, %d restored; want 0 and 1", st.ModelCalls, st.Restored)
	}
	// A different input at the same index is not the saved one: it runs.
	other, err := second.Agent(t.Context(), spec, 41, batchagent.Input{"id": "other"}).Wait(t.Context())
	if err != nil || other.Err != nil || second.Stats().ModelCalls != 1 {
		t.Errorf("changed input: %v, %v, %d calls; want it run afresh", other.Err, err, second.Stats().ModelCalls)
	}
	if h := second.Agent(t.Context(), nil, 1, nil); h == nil {
		t.Fatal("Agent(nil spec) = nil")
	} else if res, _ := h.Wait(t.Context()); res.Err == nil {
		t.Errorf("Agent(nil spec) result has no error")
	}
}
