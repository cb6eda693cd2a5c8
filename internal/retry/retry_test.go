package retry_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/llm"
)

func TestDelayBounds(t *testing.T) {
	overload := &llm.APIError{Backend: "x", Err: llm.ErrOverloaded}
	limited := &llm.APIError{Backend: "x", Err: llm.ErrRateLimited}
	told := &llm.APIError{Backend: "x", Err: llm.ErrRateLimited, RetryAfter: 2 * time.Second}
	tests := []struct {
		name    string
		p       retry.Policy
		attempt int
		err     error
		lo, hi  time.Duration
	}{
		{"first transient", retry.Policy{}, 0, overload, 0, retry.DefaultBase},
		{"third transient", retry.Policy{}, 2, overload, 0, 4 * retry.DefaultBase},
		{"capped", retry.Policy{Max: time.Second}, 20, overload, 0, time.Second},
		{"huge attempt", retry.Policy{}, 500, overload, 0, retry.DefaultMax},
		{"rate limited", retry.Policy{}, 0, limited, 0, retry.DefaultRateLimitBase},
		{"retry-after honoured", retry.Policy{}, 0, told, 2 * time.Second, 2*time.Second + 200*time.Millisecond},
		{"custom base", retry.Policy{Base: 10 * time.Millisecond}, 1, overload, 0, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var maxSeen time.Duration
			for range 2000 {
				d := tt.p.Delay(tt.attempt, tt.err)
				if d < tt.lo || d > tt.hi {
					t.Fatalf("Delay(%d, %v) = %v, want in [%v, %v]", tt.attempt, tt.err, d, tt.lo, tt.hi)
				}
				maxSeen = max(maxSeen, d)
			}
			// Full jitter spreads over the whole range.
			if maxSeen < tt.lo+(tt.hi-tt.lo)/2 {
				t.Errorf("max of 2000 delays = %v, want above the middle of [%v, %v]", maxSeen, tt.lo, tt.hi)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"fractional", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{"ms wins", http.Header{"Retry-After": {"3"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{"http date", http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"negative", http.Header{"Retry-After": {"-4"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retry.ParseRetryAfter(tt.h, now); got != tt.want {
				t.Errorf("ParseRetryAfter(%v) = %v, want %v", tt.h, got, tt.want)
			}
		})
	}
}
