package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// TestTTFTExcludesQueueWait runs 6 agents through one slot on the
// simulator, whose answers take 100ms: the agents queue for the slot up to
// half a second, yet each one's time to first token is the simulator's
// latency, from its request's sending; the slot wait is its Queue.
func TestTTFTExcludesQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const latency = 100 * time.Millisecond
		_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}}, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: latency}),
			Task:  "x {id}",
		}, batchagent.Slice(inputs(6)))
		var maxQueue time.Duration
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
			if r.Timings.TTFT != latency {
				t.Errorf("result %d: TTFT %v (queue %v), want the simulator's latency %v", r.Index, r.Timings.TTFT, r.Timings.Queue, latency)
			}
			if len(r.Spans) != 1 || r.Spans[0].TTFT != latency || r.Spans[0].Queue != r.Timings.Queue {
				t.Errorf("result %d: spans %+v, want one with TTFT %v and Queue %v", r.Index, r.Spans, latency, r.Timings.Queue)
			}
			maxQueue = max(maxQueue, r.Timings.Queue)
		}
		if want := 5 * latency; maxQueue != want {
			t.Errorf("longest queue wait %v, want %v (the last of 6 agents behind one slot)", maxQueue, want)
		}
	})
}

// TestStatsAgentGauges watches 4 agents share one slot, each calling a
// tool that takes a second: the gauges say how many are in a model call,
// in a tool and waiting for a slot at each moment, and fall to zero once
// the run ends.
func TestStatsAgentGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, _, _ := countingTool("read_file", time.Second, false)
		e := newEngine(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
		spec := mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond}),
			Task:  "read path: {id}.txt",
			Tools: []tool.Tool{slow},
		})
		done := make(chan error, 1) // the run's error, sent once
		go func() {
			_, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(4)))
			done <- err
		}()
		type gauges struct{ calling, tools, waiting int64 }
		at := func(when time.Duration, want gauges) {
			t.Helper()
			time.Sleep(when)
			synctest.Wait()
			s := e.Stats()
			if got := (gauges{s.AgentsCalling, s.AgentsInTools, s.AgentsWaiting}); got != want {
				t.Errorf("at +%v: calling, in tools, waiting = %+v, want %+v", when, got, want)
			}
		}
		// First calls one after another, 100ms each: agent 0's ends at
		// 100ms, agent 3's at 400ms; each tool runs a second after that.
		at(50*time.Millisecond, gauges{calling: 1, waiting: 3})
		at(100*time.Millisecond, gauges{calling: 1, tools: 1, waiting: 2}) // +150ms
		at(300*time.Millisecond, gauges{tools: 4})                         // +450ms
		at(700*time.Millisecond, gauges{calling: 1, tools: 3})             // +1150ms: agent 0's second call
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.AgentsCalling != 0 || s.AgentsInTools != 0 || s.AgentsWaiting != 0 || s.Done != 4 {
			t.Errorf("after the run: %d calling, %d in tools, %d waiting, %d done; want 0, 0, 0, 4", s.AgentsCalling, s.AgentsInTools, s.AgentsWaiting, s.Done)
		}
	})
}

// TestStatsToolErrors: every tool call of the run fails; the results stay
// ok (the model is told and answers), and Stats.ToolErrors counts them.
func TestStatsToolErrors(t *testing.T) {
	broken := tool.Func(tool.Spec{
		Name:        "read_file",
		Description: "test tool",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	}, func(context.Context, json.RawMessage) (string, error) {
		return "", errors.New("disk on fire")
	})
	e, res := runWith(t, batchagent.Config{}, batchagent.Def{
		Model: newSim(t, sim.Config{}),
		Task:  "read path: {id}.txt",
		Tools: []tool.Tool{broken},
	}, batchagent.Slice(inputs(5)))
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
	}
	s := e.Stats()
	if s.ToolCalls != 5 || s.ToolErrors != 5 {
		t.Errorf("Stats: %d tool calls, %d tool errors; want 5 and 5", s.ToolCalls, s.ToolErrors)
	}
}

// TestStatsAgentGaugesPacked runs 8 agents of a job that packs 4 to a
// call through one slot: while the first pack's call runs, its 4 agents
// are in a model call and the next 4 wait for the slot.
func TestStatsAgentGaugesPacked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
		spec := mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{ToolTurns: -1, Latency: 100 * time.Millisecond}),
			Task:  "item {id}", OutputSchema: json.RawMessage(outSchema), Pack: batchagent.Pack{MaxAgents: 4},
		})
		done := make(chan error, 1) // the run's error, sent once
		go func() {
			_, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(8)))
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		s := e.Stats()
		if s.AgentsCalling != 4 || s.AgentsWaiting != 4 || s.AgentsInTools != 0 {
			t.Errorf("at +50ms: %d calling, %d in tools, %d waiting; want 4, 0, 4", s.AgentsCalling, s.AgentsInTools, s.AgentsWaiting)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.AgentsCalling != 0 || s.AgentsWaiting != 0 || s.Packed != 8 {
			t.Errorf("after the run: %d calling, %d waiting, %d packed; want 0, 0, 8", s.AgentsCalling, s.AgentsWaiting, s.Packed)
		}
	})
}
