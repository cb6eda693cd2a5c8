package batchagent_test

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
)

// TestAgentTimeoutExcludesAdmission: an agent's timeout bounds its own
// work, not its wait for a slot. One slot, four agents of one 200ms call
// each and a 300ms timeout: the last agent waits 600ms for the slot and
// still succeeds; an agent whose own call outlasts the timeout still
// times out (TestAgentTimeout).
func TestAgentTimeoutExcludesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model:   newSim(t, sim.Config{Latency: 200 * time.Millisecond}),
			Task:    "x",
			Timeout: 300 * time.Millisecond,
		}), batchagent.Slice(inputs(4)))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 4 {
			t.Fatalf("Run returned %d results, want 4", len(res))
		}
		for _, r := range res {
			if r.Err != nil {
				t.Errorf("result %d (queued %v): %v, want success: the wait for the slot is not the agent's work", r.Index, r.Timings.Queue, r.Err)
			}
		}
	})
}

// TestPackedAgentTimeoutExcludesAdmission: a packed agent's wait for its
// pack to get the backend's one slot is admission too. One slot, packs of
// two, six agents, 200ms a call, a 300ms timeout: the third pack waits
// 400ms for the slot and its agents still succeed, packed.
func TestPackedAgentTimeoutExcludesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model:        newSim(t, sim.Config{Latency: 200 * time.Millisecond, ToolTurns: -1}),
			Task:         "{id}",
			OutputSchema: json.RawMessage(outSchema),
			Pack:         batchagent.Pack{MaxAgents: 2},
			Timeout:      300 * time.Millisecond,
		}), batchagent.Slice(inputs(6)))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 6 {
			t.Fatalf("Run returned %d results, want 6", len(res))
		}
		for _, r := range res {
			if r.Err != nil || r.Packed != 2 {
				t.Errorf("result %d (queued %v): packed %d, err %v; want a packed success: the wait for the slot is not the agent's work", r.Index, r.Timings.Queue, r.Packed, r.Err)
			}
		}
		if st := e.Stats(); st.PackCalls != 3 {
			t.Errorf("pack calls %d, want 3", st.PackCalls)
		}
	})
}

// TestAgentTimeoutClass: an agent that runs out of its timeout fails with
// kind timeout and class "deadline,agent_timeout", as when the timeout was
// a context deadline: the work clock that stops it is not a cancel.
func TestAgentTimeoutClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, batchagent.Config{})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model:   newSim(t, sim.Config{Latency: 500 * time.Millisecond}),
			Task:    "x",
			Timeout: 100 * time.Millisecond,
		}), batchagent.Slice(inputs(1)))
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(res[0])
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Error struct{ Kind, Class string }
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		if got.Error.Kind != "timeout" || got.Error.Class != "deadline,agent_timeout" {
			t.Errorf("timed-out agent: kind %q class %q, want timeout and deadline,agent_timeout (%s)", got.Error.Kind, got.Error.Class, line)
		}
	})
}
