package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
)

// downModel fails every call with err until the time up, then answers.
type downModel struct {
	err error
	up  time.Time

	mu    sync.Mutex
	calls int
}

func (m *downModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	if time.Now().Before(m.up) {
		return nil, m.err
	}
	return text("done"), nil
}

// TestOutageRetriedUntilBackendIsBack checks that outage failures are
// retried by time, not by MaxRetries: an agent rides out a 5s outage of
// each kind and succeeds, with far more retries than MaxRetries.
func TestOutageRetriedUntilBackendIsBack(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"rate limited with Retry-After", &llm.APIError{Backend: "x", StatusCode: 429, RetryAfter: time.Second, Err: llm.ErrRateLimited}},
		{"overloaded", &llm.APIError{Backend: "x", StatusCode: 503, Err: llm.ErrOverloaded}},
		{"connection refused", &llm.APIError{Backend: "x", Message: "connect: connection refused", Err: llm.ErrConnection}},
		{"timeout", &llm.APIError{Backend: "x", StatusCode: 504, Err: llm.ErrTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				begin := time.Now()
				m := &downModel{err: tt.err, up: begin.Add(5 * time.Second)}
				r := newRunner(t, agent.Config{Model: m, MaxRetries: 2, OutageBudget: time.Minute})
				st := start("x")
				if err := r.Run(t.Context(), st); err != nil {
					t.Fatalf("Run = %v, want success once the backend is back", err)
				}
				took := time.Since(begin)
				// The back-off is capped during an outage: the agent
				// comes back at most 1.6s (or Retry-After + 10 %) late.
				if took < 5*time.Second || took > 6700*time.Millisecond {
					t.Errorf("Run took %v, want 5s plus at most one capped back-off", took)
				}
				if st.Retries <= 2 || st.Retries != st.ModelCalls-1 {
					t.Errorf("retries %d, calls %d; want more than MaxRetries (2) retries, one per failed call", st.Retries, st.ModelCalls)
				}
			})
		})
	}
}

// TestOutageBudgetExhausted checks that an agent fails on an outage only
// once the budget is spent, measured from its first failed call, and that
// the error keeps its class.
func TestOutageBudgetExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		down := &llm.APIError{Backend: "x", Message: "connection refused", Err: llm.ErrConnection}
		m := &downModel{err: down, up: begin.Add(time.Hour)}
		r := newRunner(t, agent.Config{Model: m, OutageBudget: 30 * time.Second})
		st := start("x")
		err := r.Run(t.Context(), st)
		took := time.Since(begin)
		if !errors.Is(err, llm.ErrConnection) {
			t.Fatalf("Run = %v, want an error wrapping llm.ErrConnection", err)
		}
		if took != 30*time.Second {
			t.Errorf("Run failed after %v, want exactly the 30s budget (the last wait is cut to it)", took)
		}
		if st.ModelCalls < 10 {
			t.Errorf("%d model calls in 30s, want retries at least every 1.6s", st.ModelCalls)
		}
	})
}

// TestServerErrorsKeepMaxRetries checks that failures that are not
// outages (a server error, HTTP 500) still get MaxRetries retries only,
// and that an outage budget below zero restores the count for outages.
func TestServerErrorsKeepMaxRetries(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		budget time.Duration
	}{
		{"server error", &llm.APIError{Backend: "x", StatusCode: 500, Err: llm.ErrServer}, 0},
		{"overloaded without a budget", &llm.APIError{Backend: "x", StatusCode: 503, Err: llm.ErrOverloaded}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &downModel{err: tt.err, up: time.Now().Add(time.Hour)}
				r := newRunner(t, agent.Config{Model: m, MaxRetries: 2, OutageBudget: tt.budget})
				st := start("x")
				if err := r.Run(t.Context(), st); !errors.Is(err, tt.err) || st.ModelCalls != 3 {
					t.Errorf("Run = %v after %d calls, want %v after 3", err, st.ModelCalls, tt.err)
				}
			})
		})
	}
}

// TestStopEndsOutageWait checks that an agent waiting out a 30s
// Retry-After stops as soon as it is asked to (Config.Stopped is closed),
// with ErrStopped and its state at its last completed turn.
func TestStopEndsOutageWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		storm := &llm.APIError{Backend: "x", StatusCode: 429, RetryAfter: 30 * time.Second, Err: llm.ErrRateLimited}
		m := &downModel{err: storm, up: begin.Add(time.Hour)}
		var stopping atomic.Bool
		stopped := make(chan struct{})
		r := newRunner(t, agent.Config{Model: m, Stop: stopping.Load, Stopped: stopped})
		time.AfterFunc(time.Second, func() {
			stopping.Store(true)
			close(stopped)
		})
		st := start("x")
		err := r.Run(t.Context(), st)
		if !errors.Is(err, agent.ErrStopped) {
			t.Fatalf("Run = %v, want ErrStopped", err)
		}
		if took := time.Since(begin); took != time.Second {
			t.Errorf("Run returned after %v, want at once when stopped at 1s", took)
		}
		if st.Turns != 0 || len(st.Messages) != 1 {
			t.Errorf("state at turn %d with %d messages, want the task alone (no turn completed)", st.Turns, len(st.Messages))
		}
	})
}
