package batchagent_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// TestAdmissionPolicy runs six two-turn agents through one slot (10 ms a
// model call, instant tools) and checks when the first agent finishes
// under each policy: the turns policy and cache-aware continuation send an
// agent's second turn before the fresh agents' first, FIFO and LAS after
// them.
func TestAdmissionPolicy(t *testing.T) {
	noop := tool.Func(tool.Spec{Name: "noop", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
	const call = 10 * time.Millisecond
	tests := []struct {
		name  string
		adm   batchagent.Admission
		first time.Duration
	}{
		// Agent 0's first turn, then agent 1's (granted as agent 0's
		// slot was released, before its tool returned), then agent 0's
		// second.
		{"turns", batchagent.Admission{Policy: batchagent.PolicyTurns}, 3 * call},
		// Every first turn, then agent 0's second.
		{"fifo", batchagent.Admission{Policy: batchagent.PolicyFIFO}, 7 * call},
		{"las", batchagent.Admission{Policy: batchagent.PolicyLAS}, 7 * call},
		{"fifo+cont", batchagent.Admission{Policy: batchagent.PolicyFIFO, Continuation: time.Second}, 3 * call},
		{"las+cont", batchagent.Admission{Policy: batchagent.PolicyLAS, Continuation: time.Second}, 3 * call},
		// The default: turns, without continuation.
		{"default", batchagent.Admission{}, 3 * call},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, err := sim.New(sim.Config{Latency: call, ToolTurns: 1})
				if err != nil {
					t.Fatal(err)
				}
				adm := tt.adm
				adm.MaxInflight, adm.FixedInflight = 1, true
				e := newEngine(t, batchagent.Config{Admission: adm})
				seq, err := e.Stream(t.Context(), mustSpec(t, batchagent.Def{Model: m, Task: "{id}", Tools: []tool.Tool{noop}}), batchagent.Slice(inputs(6)))
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				var first time.Duration
				n := 0
				for r := range seq {
					if r.Err != nil || r.Turns != 2 {
						t.Errorf("agent %d: %d turns, err %v; want 2, nil", r.Index, r.Turns, r.Err)
					}
					if n == 0 {
						first = time.Since(start)
					}
					n++
				}
				if n != 6 || first != tt.first {
					t.Errorf("%s: %d results, the first after %v; want 6, after %v", tt.name, n, first, tt.first)
				}
			})
		})
	}
	if _, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{Continuation: -time.Second}}); err == nil {
		t.Error("New(negative continuation) = nil error, want error")
	}
	if _, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{Policy: "srpt"}}); err == nil {
		t.Error("New(policy srpt) = nil error, want error")
	}
}
