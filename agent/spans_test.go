package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// slowGate admits every call after wait: a fixed slot wait.
type slowGate struct{ wait time.Duration }

func (g slowGate) Acquire(ctx context.Context, _ int, _ *llm.Request) (agent.Permit, error) {
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nopPermit{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type nopPermit struct{}

func (nopPermit) Release(*llm.Response, error) {}

// slowPool is a pool with one tool, "lookup", that takes took.
func slowPool(t *testing.T, took time.Duration) *tool.Pool {
	t.Helper()
	lookup := tool.Func(tool.Spec{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			time.Sleep(took)
			return "found", nil
		})
	p, err := tool.NewPool([]tool.Tool{lookup}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sumSpans adds up the times of spans.
func sumSpans(spans []job.Span) agent.Timings {
	var s agent.Timings
	for _, sp := range spans {
		s.Queue += sp.Queue
		s.Inference += sp.Inference
		s.Backoff += sp.Backoff
		s.Tools += sp.Tools
	}
	return s
}

// TestSpansOfToolTurns runs a 3-turn agent on the simulator (two tool
// turns, then the answer) behind a gate that makes every call wait 10ms
// for its slot, with a tool that takes 50ms: it gets one span per turn,
// numbered 0 to 2, each starting when the last one ended (no time passes
// in between in the bubble), with exactly the slot wait, the model's
// time, its first token and the tools' time; and the spans add up to the
// agent's Timings.
func TestSpansOfToolTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			latency = 100 * time.Millisecond
			queue   = 10 * time.Millisecond
			tools   = 50 * time.Millisecond
		)
		m, err := sim.New(sim.Config{Latency: latency, PerToken: time.Millisecond, ToolTurns: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, agent.Config{Model: m, Tools: slowPool(t, tools), Schema: mustSchema(t), Gate: slowGate{queue}})
		st := start("item 1")
		begin := time.Now()
		if err := r.Run(t.Context(), st); err != nil {
			t.Fatal(err)
		}
		if st.Turns != 3 || len(st.Spans) != 3 {
			t.Fatalf("%d turns, %d spans; want 3 and 3", st.Turns, len(st.Spans))
		}
		next := begin
		for i, sp := range st.Spans {
			if sp.Turn != i {
				t.Errorf("span %d: Turn %d, want %d", i, sp.Turn, i)
			}
			if !sp.Start.Equal(next) {
				t.Errorf("span %d: Start %v after the run began, want %v (the previous span's end)", i, sp.Start.Sub(begin), next.Sub(begin))
			}
			if sp.Queue != queue {
				t.Errorf("span %d: Queue %v, want %v", i, sp.Queue, queue)
			}
			if sp.Inference < latency {
				t.Errorf("span %d: Inference %v, want at least the model's latency %v", i, sp.Inference, latency)
			}
			if sp.TTFT != latency {
				t.Errorf("span %d: TTFT %v, want the model's latency %v (from the sending, the slot wait not included)", i, sp.TTFT, latency)
			}
			wantTools := tools
			if i == 2 {
				wantTools = 0
			}
			if sp.Tools != wantTools || sp.Backoff != 0 || sp.Tier != 0 {
				t.Errorf("span %d: Tools %v Backoff %v Tier %d, want %v, 0, 0", i, sp.Tools, sp.Backoff, sp.Tier, wantTools)
			}
			next = sp.End()
		}
		if end := time.Now(); !next.Equal(end) {
			t.Errorf("last span ends %v after the run began, want %v (when Run returned)", next.Sub(begin), end.Sub(begin))
		}
		sum := sumSpans(st.Spans)
		if sum.Queue != st.Timings.Queue || sum.Inference != st.Timings.Inference || sum.Tools != st.Timings.Tools || sum.Backoff != st.Timings.Backoff {
			t.Errorf("spans add up to %+v, want the Timings %+v", sum, st.Timings)
		}
		if st.Spans[0].TTFT != st.Timings.TTFT {
			t.Errorf("first span's TTFT %v, want the agent's %v", st.Spans[0].TTFT, st.Timings.TTFT)
		}
	})
}

// TestSpanOfRetriedAndFailedTurns: a turn retried after a 429 holds its
// back-off and both calls' time, its TTFT counted from the sending of the
// call that was answered; a turn whose call fails for good still gets its
// span.
func TestSpanOfRetriedAndFailedTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limited := &llm.APIError{Backend: "x", StatusCode: 429, RetryAfter: 2 * time.Second, Err: llm.ErrRateLimited}
		bad := &llm.APIError{Backend: "x", StatusCode: 400, Err: llm.ErrBadRequest}
		m := &scripted{answers: []any{limited, calls(llm.ToolCall{ID: "a", Name: "echo", Arguments: json.RawMessage(`{}`)}), bad}}
		r := newRunner(t, agent.Config{Model: m, Tools: newPool(t, nil), Gate: slowGate{time.Second}})
		st := start("x")
		begin := time.Now()
		err := r.Run(t.Context(), st)
		if !errors.Is(err, llm.ErrBadRequest) {
			t.Fatalf("Run = %v, want the 400", err)
		}
		if len(st.Spans) != 2 || st.Turns != 1 {
			t.Fatalf("%d spans after %d turns, want 2 after 1 (the failed turn has one)", len(st.Spans), st.Turns)
		}
		first, failed := st.Spans[0], st.Spans[1]
		if !first.Start.Equal(begin) || first.Queue != 2*time.Second || first.Backoff != st.Timings.Backoff || first.Backoff < 2*time.Second {
			t.Errorf("retried turn: Start +%v Queue %v Backoff %v; want +0s, 2s (two slot waits), the Retry-After 2s plus jitter",
				first.Start.Sub(begin), first.Queue, first.Backoff)
		}
		if first.TTFT != 0 {
			t.Errorf("retried turn: TTFT %v, want 0: the scripted model answers the moment it is sent, and neither the slot waits nor the back-off count", first.TTFT)
		}
		if failed.Turn != 1 || failed.Queue != time.Second || failed.TTFT != 0 || !failed.Start.Equal(first.End()) {
			t.Errorf("failed turn: %+v, want turn 1, a 1s slot wait, no TTFT, starting at %v", failed, first.End())
		}
		if sum := sumSpans(st.Spans); sum.Queue != st.Timings.Queue || sum.Backoff != st.Timings.Backoff || sum.Inference != st.Timings.Inference {
			t.Errorf("spans add up to %+v, want the Timings %+v", sum, st.Timings)
		}
	})
}

// TestSpansOfResumedAgent: an agent resumed from a checkpointed state keeps
// the spans of its earlier run and appends its own, numbered on; one that
// holds job.MaxSpans already records no more, its turns still counted.
func TestSpansOfResumedAgent(t *testing.T) {
	earlier := job.Span{Turn: 0, Start: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), Inference: time.Second}
	m := &scripted{answers: []any{text("done"), text("done")}}
	r := newRunner(t, agent.Config{Model: m})
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}, {Role: llm.RoleAssistant, Content: "thinking"}, {Role: llm.RoleUser, Content: "go on"}},
		Turns: 1, Spans: []job.Span{earlier}}
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if len(st.Spans) != 2 || st.Spans[0] != earlier || st.Spans[1].Turn != 1 || !st.Spans[1].Start.After(earlier.Start) {
		t.Errorf("spans %+v, want the earlier one then turn 1's", st.Spans)
	}

	full := &agent.State{Messages: st.Messages[:1], Turns: 0, Spans: make([]job.Span, job.MaxSpans)}
	if err := r.Run(t.Context(), full); err != nil {
		t.Fatal(err)
	}
	if len(full.Spans) != job.MaxSpans || full.Turns != 1 {
		t.Errorf("%d spans after %d turns, want %d (the cap) after 1", len(full.Spans), full.Turns, job.MaxSpans)
	}
}

// TestCloneCopiesSpans: a clone's spans are its own, as the checkpoint
// code that keeps clones needs.
func TestCloneCopiesSpans(t *testing.T) {
	st := start("x")
	st.Spans = []job.Span{{Turn: 0, Inference: time.Second}}
	c := st.Clone()
	st.Spans[0].Inference = time.Minute
	st.Spans = append(st.Spans, job.Span{Turn: 1})
	if len(c.Spans) != 1 || c.Spans[0].Inference != time.Second {
		t.Errorf("clone's spans = %+v after the original changed, want [{Turn:0 Inference:1s}]", c.Spans)
	}
}
