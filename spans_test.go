package batchagent_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/tool"
)

// spanTotals adds up the inference and tool time of spans.
func spanTotals(spans []batchagent.Span) (inference, tools time.Duration) {
	for _, sp := range spans {
		inference += sp.Inference
		tools += sp.Tools
	}
	return inference, tools
}

// TestResultSpansFresh: an agent run afresh (a tool turn taking 50ms, then
// the answer, each call 100ms) reports when it started and one span per
// turn, the first starting as the agent did and the last ending as it
// finished; the spans add up to its Timings.
func TestResultSpansFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lookup, _, _ := countingTool("read_file", 50*time.Millisecond, false)
		begin := time.Now()
		_, res := runWith(t, batchagent.Config{}, batchagent.Def{
			ID: "fresh", Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond}), Task: "read {id}",
			Tools: []tool.Tool{lookup}, OutputSchema: json.RawMessage(outSchema),
		}, batchagent.Slice(inputs(3)))
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
			if !r.Started.Equal(begin) {
				t.Errorf("result %d: Started %v after Run began, want 0s", r.Index, r.Started.Sub(begin))
			}
			if len(r.Spans) != 2 || r.Spans[0].Turn != 0 || r.Spans[1].Turn != 1 {
				t.Fatalf("result %d: spans %+v, want turns 0 and 1", r.Index, r.Spans)
			}
			if !r.Spans[0].Start.Equal(r.Started) || r.Spans[0].Tools != 50*time.Millisecond || r.Spans[1].Tools != 0 {
				t.Errorf("result %d: first span starts %v after the agent with tools %v, second has tools %v; want 0s, 50ms, 0s",
					r.Index, r.Spans[0].Start.Sub(r.Started), r.Spans[0].Tools, r.Spans[1].Tools)
			}
			if end := r.Started.Add(r.Timings.Total); !r.Spans[1].End().Equal(end) {
				t.Errorf("result %d: last span ends %v after the start, want the agent's total %v", r.Index, r.Spans[1].End().Sub(r.Started), r.Timings.Total)
			}
			if inf, tools := spanTotals(r.Spans); inf != r.Timings.Inference || tools != r.Timings.Tools {
				t.Errorf("result %d: spans add up to inference %v tools %v, want %v and %v", r.Index, inf, tools, r.Timings.Inference, r.Timings.Tools)
			}
		}
	})
}

// TestResultSpansPacked: an agent answered in a packed call has one span:
// from joining the pack, its wait for the call (linger included) and the
// call until its entry closed, which is when it finished.
func TestResultSpansPacked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, res := runWith(t, batchagent.Config{}, batchagent.Def{
			ID: "packed", Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond, ToolTurns: -1}), Task: "{id}",
			OutputSchema: json.RawMessage(outSchema), Pack: batchagent.Pack{MaxAgents: 4},
		}, batchagent.Slice(inputs(4)))
		for _, r := range res {
			if r.Err != nil || r.Packed < 2 {
				t.Fatalf("result %d: packed %d err %v, want a packed answer", r.Index, r.Packed, r.Err)
			}
			if len(r.Spans) != 1 {
				t.Fatalf("result %d: %d spans, want 1", r.Index, len(r.Spans))
			}
			sp := r.Spans[0]
			if sp.Turn != 0 || !sp.Start.Equal(r.Started) || sp.Inference < 100*time.Millisecond || sp.TTFT < 100*time.Millisecond {
				t.Errorf("result %d: span %+v starting %v after the agent, want turn 0 at 0s, inference and TTFT ≥ 100ms", r.Index, sp, sp.Start.Sub(r.Started))
			}
			if sp.Queue != r.Timings.Queue || sp.Inference != r.Timings.Inference || sp.Queue+sp.Inference != r.Timings.Total {
				t.Errorf("result %d: span queue %v inference %v, want the Timings' %v and %v, adding up to the total %v",
					r.Index, sp.Queue, sp.Inference, r.Timings.Queue, r.Timings.Inference, r.Timings.Total)
			}
		}
	})
}

// TestResultSpansFallbackTier: an agent whose primary ran out of its 1s
// budget and whose fallback answered has the primary's cut-off turn, then
// the fallback's turn with Tier 1, starting when the budget ran out.
func TestResultSpansFallbackTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Second, ToolTurns: -1}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
			Budget:    time.Second,
			Fallbacks: []batchagent.Fallback{{Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond, ToolTurns: -1})}},
		}), batchagent.Slice(inputs(2)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.Tier != 1 {
				t.Fatalf("result %d: tier %d err %v, want tier 1's answer", r.Index, r.Tier, r.Err)
			}
			want := []batchagent.Span{
				{Turn: 0, Start: r.Started, Inference: time.Second},
				{Turn: 0, Start: r.Started.Add(time.Second), Inference: 100 * time.Millisecond, TTFT: 100 * time.Millisecond, Tier: 1},
			}
			if diff := gocmp.Diff(want, r.Spans); diff != "" {
				t.Errorf("result %d: spans (-want +got):\n%s", r.Index, diff)
			}
		}
	})
}

// TestResultSpansRestoredAndResumed runs a job with a SQLite checkpoint,
// then again: the restored results have the first run's start and spans.
// Then half the agents are set back to their first turn, as a kill would
// leave them: resumed, they keep that turn's span and append the next
// turn's, with the new run's start.
func TestResultSpansRestoredAndResumed(t *testing.T) {
	store, err := checkpoint.Open(filepath.Join(t.TempDir(), "state.db"), checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	def := checkpointDef(newSim(t, sim.Config{Seed: 9}))
	_, first := runWith(t, batchagent.Config{Checkpoint: store}, def, batchagent.Slice(inputs(6)))
	for _, r := range first {
		if r.Err != nil || len(r.Spans) != 2 || r.Started.IsZero() {
			t.Fatalf("first run: result %d: %d spans, started %v, err %v; want 2 spans and a start", r.Index, len(r.Spans), r.Started, r.Err)
		}
	}
	_, restored := runWith(t, batchagent.Config{Checkpoint: store}, def, batchagent.Slice(inputs(6)))
	for i, r := range restored {
		if !r.Started.Equal(first[i].Started) {
			t.Errorf("restored result %d: Started %v, want the first run's %v", i, r.Started, first[i].Started)
		}
		if diff := gocmp.Diff(first[i].Spans, r.Spans); diff != "" {
			t.Errorf("restored result %d: spans differ from the first run's (-first +restored):\n%s", i, diff)
		}
	}

	states, err := store.Load(t.Context(), "ck")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if st.Index%2 != 0 {
			continue
		}
		full, err := store.State(t.Context(), "ck", st.Index)
		if err != nil {
			t.Fatal(err)
		}
		full.Status, full.Output, full.Turns, full.Messages, full.Spans = agent.StatusRunning, nil, 1, full.Messages[:3], full.Spans[:1]
		if err := store.Save(t.Context(), full); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	_, resumed := runWith(t, batchagent.Config{Checkpoint: store}, def, batchagent.Slice(inputs(6)))
	for i, r := range resumed {
		if i%2 != 0 {
			if diff := gocmp.Diff(first[i].Spans, r.Spans); diff != "" {
				t.Errorf("restored result %d: spans differ from the first run's (-first +restored):\n%s", i, diff)
			}
			continue
		}
		if len(r.Spans) != 2 || !gocmp.Equal(r.Spans[0], first[i].Spans[0]) || r.Spans[1].Turn != 1 || r.Spans[1].Start.Before(before) {
			t.Errorf("resumed result %d: spans %+v; want the first run's turn 0 %+v, then turn 1 starting in this run", i, r.Spans, first[i].Spans[0])
		}
		if r.Started.Before(before) {
			t.Errorf("resumed result %d: Started %v, before the resumed run began (%v)", i, r.Started, before)
		}
	}
}
