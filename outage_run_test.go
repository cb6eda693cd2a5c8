package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// step is how one call of a scriptModel goes: after delay, it fails with
// err (after one text event if partial), or answers with a tool call or
// the text "ok".
type step struct {
	delay    time.Duration
	partial  bool
	err      error
	toolCall bool
}

// scriptModel is a hand-written streaming fake of a hosted backend: its
// n-th call (from 1) goes as plan says.
type scriptModel struct {
	plan func(n int, req *llm.Request) step

	mu sync.Mutex
	n  int
}

func (m *scriptModel) Capabilities() llm.Capabilities {
	return llm.Capabilities{DefaultConcurrency: 16}
}

func (m *scriptModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	var acc llm.Accumulator
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return nil, err
		}
		_ = acc.Add(ev)
	}
	return acc.Response(), nil
}

func (m *scriptModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		m.mu.Lock()
		m.n++
		s := m.plan(m.n, req)
		m.mu.Unlock()
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			yield(llm.Event{}, ctx.Err())
			return
		}
		switch {
		case s.err != nil:
			if s.partial && !yield(llm.Event{Type: llm.EventText, Text: "o"}, nil) {
				return
			}
			yield(llm.Event{}, s.err)
		case s.toolCall:
			if yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{ID: "c1", Name: "read_file", Arguments: "{}"}}, nil) {
				yield(llm.Event{Type: llm.EventDone, FinishReason: llm.FinishToolCalls}, nil)
			}
		default:
			if yield(llm.Event{Type: llm.EventText, Text: "ok"}, nil) {
				yield(llm.Event{Type: llm.EventDone, FinishReason: llm.FinishStop}, nil)
			}
		}
	}
}

var (
	refused   = &llm.APIError{Backend: "fake", Message: "connect: connection refused", Err: llm.ErrConnection}
	cut       = &llm.APIError{Backend: "fake", Message: "stream ended before [DONE]", Err: llm.ErrConnection}
	throttled = &llm.APIError{Backend: "fake", StatusCode: 429, Err: llm.ErrRateLimited}
)

func wantAllOK(t *testing.T, what string, res []batchagent.Result, n int) {
	t.Helper()
	if len(res) != n {
		t.Fatalf("%s: %d results, want %d", what, len(res), n)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: result %d: %v", what, r.Index, r.Err)
		}
	}
}

func wantAllUnavailable(t *testing.T, what string, res []batchagent.Result, n int) {
	t.Helper()
	if len(res) != n {
		t.Fatalf("%s: %d results, want %d", what, len(res), n)
	}
	for _, r := range res {
		if batchagent.KindOf(r.Err) != batchagent.KindCanceled || !errors.Is(r.Err, batchagent.ErrBackendUnavailable) {
			t.Fatalf("%s: result %d: %v (kind %q), want kind canceled wrapping ErrBackendUnavailable", what, r.Index, r.Err, batchagent.KindOf(r.Err))
		}
	}
}

// TestOutageClockSkipsQueueing checks that an agent's outage budget
// measures time the backend could not answer, not time spent queued for
// the only slot behind a call being answered: an agent gets a 429, waits
// 5s for the slot (longer than its 2s budget) while another agent's call
// is answered, then gets one more 429, and still retries and succeeds.
func TestOutageClockSkipsQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptModel{plan: func(n int, _ *llm.Request) step {
			switch n {
			case 1, 3:
				return step{err: throttled}
			case 2:
				return step{delay: 5 * time.Second}
			}
			return step{delay: 10 * time.Millisecond}
		}}
		_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}},
			batchagent.Def{Model: m, Task: "{id}", OutageBudget: 2 * time.Second}, batchagent.Slice(inputs(2)))
		wantAllOK(t, "run", res, 2)
	})
}

// TestSlowFirstAnswerIsNotDeadBackend checks that a backend is not
// declared down while a call is connected: connections fail for 20s,
// longer than the start window, but one call admitted at the start gets
// its first event after 15s; the run rides the failures out and every
// agent succeeds, that call included.
func TestSlowFirstAnswerIsNotDeadBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &scriptModel{plan: func(n int, _ *llm.Request) step {
			switch {
			case n == 1:
				return step{delay: 15 * time.Second}
			case time.Since(begin) < 20*time.Second:
				return step{err: refused}
			}
			return step{delay: 10 * time.Millisecond}
		}}
		_, res := runWith(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}", OutageBudget: time.Minute}, batchagent.Slice(inputs(5)))
		wantAllOK(t, "run", res, 5)
	})
}

// TestCutStreamsAreAnswers checks that streams cut after their first
// event are not connection failures that declare the backend down: for
// 12s, longer than the start window, every stream breaks after one event;
// the agents retry and succeed once the streams end properly.
func TestCutStreamsAreAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &scriptModel{plan: func(n int, _ *llm.Request) step {
			if time.Since(begin) < 12*time.Second {
				return step{delay: 10 * time.Millisecond, partial: true, err: cut}
			}
			return step{delay: 10 * time.Millisecond}
		}}
		_, res := runWith(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}", OutageBudget: time.Minute}, batchagent.Slice(inputs(5)))
		wantAllOK(t, "run", res, 5)
	})
}

// TestDeadBackendOnLaterRun checks that every run on an Engine detects a
// backend that never answers it, although it answered an earlier run, and
// that a run after the backend came back succeeds again.
func TestDeadBackendOnLaterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dead atomic.Bool
		m := &scriptModel{plan: func(int, *llm.Request) step {
			if dead.Load() {
				return step{err: refused}
			}
			return step{delay: 10 * time.Millisecond}
		}}
		e := newEngine(t, batchagent.Config{})
		spec := mustSpec(t, batchagent.Def{Model: m, Task: "{id}"})
		run := func() []batchagent.Result {
			res, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(5)))
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		wantAllOK(t, "first run", run(), 5)
		dead.Store(true)
		begin := time.Now()
		wantAllUnavailable(t, "second run", run(), 5)
		if took := time.Since(begin); took > batchagent.DefaultStartWindow+100*time.Millisecond {
			t.Errorf("second run ended after %v, want about the start window %v", took, batchagent.DefaultStartWindow)
		}
		dead.Store(false)
		wantAllOK(t, "third run", run(), 5)
	})
}

// TestDeadBackendConcurrentRuns runs two runs on one Engine: run A gets
// answers, then the backend goes away for 30s; run B, started 1s into
// the outage, never gets an answer and ends with ErrBackendUnavailable
// after the start window, while run A rides the outage out and succeeds.
func TestDeadBackendConcurrentRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &scriptModel{plan: func(int, *llm.Request) step {
			if d := time.Since(begin); d >= 20*time.Millisecond && d < 30*time.Second {
				return step{err: refused}
			}
			return step{delay: 10 * time.Millisecond}
		}}
		e := newEngine(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
		spec := mustSpec(t, batchagent.Def{Model: m, Task: "{id}", OutageBudget: time.Minute})
		var resA []batchagent.Result
		var errA error
		var wg sync.WaitGroup
		wg.Go(func() { resA, errA = e.Run(t.Context(), spec, batchagent.Slice(inputs(3))) })
		time.Sleep(time.Second) // the bubble's clock: start B 1s into the outage
		resB, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(3)))
		if err != nil {
			t.Fatal(err)
		}
		tookB := time.Since(begin)
		wg.Wait()
		if errA != nil {
			t.Fatal(errA)
		}
		wantAllUnavailable(t, "run B", resB, 3)
		// B's first call waits out the global pause in force at 1s (under
		// 1s of back-off), and fails: the start window runs from there.
		if want := time.Second + batchagent.DefaultStartWindow; tookB < want || tookB > want+time.Second {
			t.Errorf("run B ended %v after the start, want the start window after its first failure, %v-%v", tookB, want, want+time.Second)
		}
		wantAllOK(t, "run A", resA, 3)
	})
}

// TestDrainDuringRetryAfterStorm drains a run whose agents wait out a
// storm of 429s asking for 30s: in the global pause and in their own
// back-off. The run ends at once, every agent is canceled, and each keeps
// its completed first turn in the checkpoint instead of a failure.
func TestDrainDuringRetryAfterStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		storm := &llm.APIError{Backend: "fake", StatusCode: 429, RetryAfter: 30 * time.Second, Err: llm.ErrRateLimited}
		m := &scriptModel{plan: func(_ int, req *llm.Request) step {
			if len(req.Messages) == 1 { // the first turn: the task alone
				return step{delay: 10 * time.Millisecond, toolCall: true}
			}
			return step{delay: 10 * time.Millisecond, err: storm}
		}}
		read := tool.Func(tool.Spec{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, json.RawMessage) (string, error) { return "contents", nil })
		ck := &fakeCheckpointer{}
		// A slot for every agent: with fewer, agents done with their first
		// turn take the free slots first (priority by turns done), the
		// storm's pause can then stop the others before their first turn,
		// and fewer than 20 would be checkpointed.
		e := newEngine(t, batchagent.Config{Checkpoint: ck, Admission: batchagent.Admission{MaxInflight: 20, FixedInflight: true}})
		spec := mustSpec(t, batchagent.Def{Model: m, Task: "{id}", Tools: []tool.Tool{read}, OutageBudget: time.Hour})
		begin := time.Now()
		drain := time.AfterFunc(time.Second, e.Drain)
		defer drain.Stop()
		res, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(20)))
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took > time.Second+10*time.Millisecond {
			t.Errorf("drained run ended after %v, want at once after the drain at 1s", took)
		}
		for _, r := range res {
			if batchagent.KindOf(r.Err) != batchagent.KindCanceled {
				t.Errorf("result %d: %v (kind %q), want canceled", r.Index, r.Err, batchagent.KindOf(r.Err))
			}
		}
		if len(ck.states) != 20 {
			t.Fatalf("%d agents checkpointed, want 20", len(ck.states))
		}
		for _, st := range ck.states {
			if st.Status != agent.StatusRunning || st.Turns != 1 {
				t.Errorf("agent %d saved with status %v at turn %d, want running at its completed first turn", st.Index, st.Status, st.Turns)
			}
		}
	})
}
