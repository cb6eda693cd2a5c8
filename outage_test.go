package batchagent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
)

// flakyModel is a hand-written llm.Model fake of a hosted backend that
// fails every call that starts in [down, up), and the first failFirst
// calls, with err and answers the others after latency. It records when
// each call started and how it ended.
type flakyModel struct {
	down, up  time.Time
	failFirst int
	err       error
	latency   time.Duration

	mu     sync.Mutex
	starts []time.Time
	failed []time.Time // when each failed call ended
	ok     int
}

func (m *flakyModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	now := time.Now()
	m.mu.Lock()
	m.starts = append(m.starts, now)
	fail := !now.Before(m.down) && now.Before(m.up) || len(m.failed) < m.failFirst
	if fail {
		m.failed = append(m.failed, now)
	}
	m.mu.Unlock()
	if fail {
		return nil, m.err
	}
	t := time.NewTimer(m.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m.mu.Lock()
	m.ok++
	m.mu.Unlock()
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "ok"}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 1}}, nil
}

func (m *flakyModel) Capabilities() llm.Capabilities { return llm.Capabilities{DefaultConcurrency: 16} }

// callsIn counts the calls that started in [from, to).
func (m *flakyModel) callsIn(from, to time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.starts {
		if !s.Before(from) && s.Before(to) {
			n++
		}
	}
	return n
}

// runAll runs d over n inputs on a new engine with cfg.
func runAll(t *testing.T, cfg batchagent.Config, d batchagent.Def, n int) (*batchagent.Engine, []batchagent.Result) {
	t.Helper()
	return runWith(t, cfg, d, batchagent.Slice(inputs(n)))
}

// TestRetryAfterPausesAdmission runs 200 agents through a 5s storm of
// 429s that ask for a 1s wait: every agent succeeds, and the wait pauses
// admission for all of them, so the backend sees a handful of calls per
// second, not one per agent per second.
func TestRetryAfterPausesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{down: begin, up: begin.Add(5 * time.Second), latency: 10 * time.Millisecond,
			err: &llm.APIError{Backend: "fake", StatusCode: 429, RetryAfter: time.Second, Err: llm.ErrRateLimited}}
		e, res := runAll(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}"}, 200)
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
		}
		storm := m.callsIn(begin, begin.Add(5*time.Second))
		t.Logf("%d calls during the storm, %d in all; limit history %v", storm, len(m.starts), e.Stats().LimitHistory)
		// The first wave is the 16 slots; after it, each 1s pause lets
		// through at most the (halved) limit.
		if storm > 16+5*16 {
			t.Errorf("%d calls during the 5s storm, want admission paused for everyone after each 429 (≤ %d)", storm, 16+5*16)
		}
		// Nothing is admitted while a pause runs: no call starts within
		// 1s after the first 429.
		if n := m.callsIn(begin.Add(time.Nanosecond), begin.Add(time.Second)); n != 0 {
			t.Errorf("%d calls started within the first 1s pause, want none", n)
		}
	})
}

// TestConnectionFailuresBackOffGlobally runs 200 agents through a 2s
// outage in which every connection fails: every agent succeeds, the
// inflight limit is lowered, and admission backs off for everyone.
func TestConnectionFailuresBackOffGlobally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{down: begin.Add(100 * time.Millisecond), up: begin.Add(2100 * time.Millisecond), latency: 10 * time.Millisecond,
			err: &llm.APIError{Backend: "fake", Message: "connect: connection refused", Err: llm.ErrConnection}}
		e, res := runAll(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}"}, 200)
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
		}
		st := e.Stats()
		failed := len(m.failed)
		t.Logf("%d failed calls, %d in all, limit history %v", failed, len(m.starts), st.LimitHistory)
		if failed > 100 {
			t.Errorf("%d calls failed in the 2s outage, want the global back-off to hold the agents (≤ 100)", failed)
		}
		lowered := false
		for _, c := range st.LimitHistory {
			lowered = lowered || c.Limit < 16
		}
		if !lowered {
			t.Errorf("limit history %v, want the limit lowered by the connection failures", st.LimitHistory)
		}
	})
}

// TestDeadBackendStopsRun checks that a backend no call ever reached ends
// the run after the start window: every result is canceled with an error
// wrapping ErrBackendUnavailable, none is a failure.
func TestDeadBackendStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{down: begin, up: begin.Add(time.Hour),
			err: &llm.APIError{Backend: "fake", Message: "connect: connection refused", Err: llm.ErrConnection}}
		e, res := runAll(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}"}, 50)
		took := time.Since(begin)
		if len(res) != 50 {
			t.Fatalf("%d results, want 50", len(res))
		}
		for _, r := range res {
			if batchagent.KindOf(r.Err) != batchagent.KindCanceled || !errors.Is(r.Err, batchagent.ErrBackendUnavailable) {
				t.Fatalf("result %d: %v (kind %q), want kind canceled wrapping ErrBackendUnavailable", r.Index, r.Err, batchagent.KindOf(r.Err))
			}
		}
		// Never answered since the engine began: the short first window.
		if took < batchagent.FirstStartWindow || took > batchagent.FirstStartWindow+100*time.Millisecond {
			t.Errorf("run ended after %v, want about the first start window %v", took, batchagent.FirstStartWindow)
		}
		if n := len(m.starts); n > 100 {
			t.Errorf("%d calls to the dead backend, want the global back-off to hold them", n)
		}
		if st := e.Stats(); st.Failed != 50 || st.ByKind[batchagent.KindCanceled] != 50 {
			t.Errorf("stats: failed %d, by kind %v; want 50 canceled", st.Failed, st.ByKind)
		}
	})
}

// TestOutageAfterAnswerIsNotDeadBackend checks that a backend that
// answered once and then goes away for longer than the start window is
// waited for, within the outage budget, and that a shorter start window
// (set with a shorter budget, as a job with a short budget would) ends a
// run on a dead backend sooner.
func TestOutageAfterAnswerIsNotDeadBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{down: begin.Add(50 * time.Millisecond), up: begin.Add(15 * time.Second), latency: 10 * time.Millisecond,
			err: &llm.APIError{Backend: "fake", Message: "connection reset by peer", Err: llm.ErrConnection}}
		_, res := runAll(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}", OutageBudget: time.Minute}, 100)
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{down: begin, up: begin.Add(time.Hour),
			err: &llm.APIError{Backend: "fake", Message: "connect: connection refused", Err: llm.ErrConnection}}
		_, res := runAll(t, batchagent.Config{Admission: batchagent.Admission{StartWindow: 2 * time.Second}},
			batchagent.Def{Model: m, Task: "{id}", OutageBudget: 2 * time.Second}, 10)
		if took := time.Since(begin); took > 5*time.Second || !errors.Is(res[0].Err, batchagent.ErrBackendUnavailable) {
			t.Errorf("run ended after %v with %v, want ErrBackendUnavailable after about the 2s budget", took, res[0].Err)
		}
	})
}

// TestNoStartWindow checks that a start window turned off declares no
// backend unavailable: with no outage budget either, agents on a backend
// no call ever reached fail on their own, with the connection error,
// after their retries, long after the default start window.
func TestNoStartWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{down: begin, up: begin.Add(time.Hour),
			err: &llm.APIError{Backend: "fake", Message: "connect: connection refused", Err: llm.ErrConnection}}
		_, res := runAll(t, batchagent.Config{Admission: batchagent.Admission{NoStartWindow: true}},
			batchagent.Def{Model: m, Task: "{id}", NoOutageBudget: true, MaxRetries: 8}, 3)
		for _, r := range res {
			if batchagent.KindOf(r.Err) != batchagent.KindBackend || !errors.Is(r.Err, llm.ErrConnection) || errors.Is(r.Err, batchagent.ErrBackendUnavailable) {
				t.Errorf("result %d: %v (kind %q), want a backend failure on the connection error, not ErrBackendUnavailable", r.Index, r.Err, batchagent.KindOf(r.Err))
			}
			if r.ModelCalls != 9 {
				t.Errorf("result %d: %d attempts, want 9 (1 + 8 retries)", r.Index, r.ModelCalls)
			}
		}
		if took := time.Since(begin); took <= batchagent.DefaultStartWindow {
			t.Errorf("run ended after %v, want the retries to outlast the default start window %v", took, batchagent.DefaultStartWindow)
		}
	})
}

// TestSingleOverloadStaysShort checks that a lone 503 without Retry-After
// (the 2 % of failures bench fair injects) neither pauses the other agents
// nor delays its own agent by more than the short default back-off.
func TestSingleOverloadStaysShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		m := &flakyModel{failFirst: 1, latency: 10 * time.Millisecond,
			err: &llm.APIError{Backend: "fake", StatusCode: 503, Err: llm.ErrOverloaded}}
		_, res := runAll(t, batchagent.Config{}, batchagent.Def{Model: m, Task: "{id}"}, 16)
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
		}
		if len(m.failed) != 1 {
			t.Fatalf("%d calls failed, want the first only", len(m.failed))
		}
		// The 503 halves the limit (16 → 8) but pauses no one: the
		// other calls went on at once, and the retry came within the
		// first back-off ceiling (50ms).
		if n := m.callsIn(begin, begin.Add(time.Nanosecond)); n < 8 {
			t.Errorf("%d calls started at once, want at least the halved limit 8: a 503 without Retry-After pauses no one", n)
		}
		if took := time.Since(begin); took > 70*time.Millisecond {
			t.Errorf("run took %v, want at most the 50ms back-off plus two 10ms calls", took)
		}
	})
}
