package checkpoint_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// TestInputNumbersExact saves inputs holding numbers that float64 cannot
// hold (an integer above 2^53, 1e999) or would reformat (1.10), in a
// running and a final state: Load and State return them as the same JSON
// text, and a state holding 1e999 does not make the job unreadable.
func TestInputNumbersExact(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	in := job.Input{
		"big":    json.Number("1234567890123456789"),
		"huge":   json.Number("1e999"),
		"tenth":  json.Number("1.10"),
		"nested": map[string]any{"list": []any{json.Number("-98765432109876543210"), "x"}},
	}
	want := []agent.State{
		{JobID: "j", Index: 0, Input: in, Status: agent.StatusDone, Output: json.RawMessage(`{"n":12345678901234567890123}`)},
		{JobID: "j", Index: 1, Input: in, Status: agent.StatusRunning, Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}},
	}
	for _, st := range want {
		if err := s.Save(t.Context(), st); err != nil {
			t.Fatalf("Save(%d) = %v", st.Index, err)
		}
	}
	checkStates(t, s, "j", want...)
	got, err := s.Load(t.Context(), "j")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range got {
		b, err := json.Marshal(st.Input)
		if err != nil {
			t.Fatalf("agent %d: marshal input: %v", st.Index, err)
		}
		if w := `{"big":1234567890123456789,"huge":1e999,"nested":{"list":[-98765432109876543210,"x"]},"tenth":1.10}`; string(b) != w {
			t.Errorf("agent %d: input = %s, want %s", st.Index, b, w)
		}
	}
	if diff := cmp.Diff(`{"n":12345678901234567890123}`, string(got[0].Output)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
