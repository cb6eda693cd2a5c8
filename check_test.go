package batchagent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
)

// TestCheckFeedsBack checks that a semantic check's error goes back to the
// model like a schema problem, and ends the agent as a validation failure
// once the corrections are used up.
func TestCheckFeedsBack(t *testing.T) {
	var calls atomic.Int64
	reject := errors.New("value must be even")
	d := batchagent.Def{
		Model:        newSim(t, sim.Config{Seed: 1}),
		Task:         "item {id}",
		OutputSchema: json.RawMessage(outSchema),
		Check: func(out json.RawMessage) error {
			calls.Add(1)
			return reject
		},
	}
	res, err := batchagent.Run(t.Context(), mustSpec(t, d), batchagent.Slice(inputs(1)))
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	ae, ok := r.Err.(*batchagent.AgentError)
	if !ok || ae.Kind != batchagent.KindValidation || !strings.Contains(ae.Error(), "value must be even") {
		t.Fatalf("err = %v, want a validation failure carrying the check's message", r.Err)
	}
	if calls.Load() != 3 || r.ModelCalls != 3 {
		t.Errorf("check ran %d times over %d model calls, want 3 and 3 (1 + 2 corrections)", calls.Load(), r.ModelCalls)
	}
	if len(ae.Problems()) != 1 || ae.Problems()[0].Path != "$" {
		t.Errorf("problems = %v, want one at $", ae.Problems())
	}
}

func TestCheckAccepts(t *testing.T) {
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: newSim(t, sim.Config{Seed: 1}), Task: "item {id}", OutputSchema: json.RawMessage(outSchema),
		Check: func(out json.RawMessage) error { return nil },
	}), batchagent.Slice(inputs(3)))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("Run returned %d results, want 3", len(res))
	}
	for i, r := range res {
		if r.Index != i || r.Err != nil || r.ModelCalls != 1 {
			t.Errorf("result %d: index %d err %v attempts %d, want index %d and success on the first call", i, r.Index, r.Err, r.ModelCalls, i)
		}
		var out struct {
			Value     *int    `json:"value"`
			FirstWord *string `json:"first_word"`
		}
		if err := json.Unmarshal(r.Output, &out); err != nil || out.Value == nil || out.FirstWord == nil {
			t.Errorf("result %d: output %s, want an object with value and first_word (%v)", i, r.Output, err)
		}
	}
}
