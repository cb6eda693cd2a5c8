package simhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// serve sends one chat-completion request to s through ServeHTTP (no
// sockets, so it runs inside a synctest bubble) and returns the status and
// the Retry-After headers.
func serve(t *testing.T, s *simhttp.Server) (status int, retryAfter, retryAfterMS string) {
	t.Helper()
	b, err := json.Marshal(request("S", "Say hello."))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", bytes.NewReader(b))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("retry-after-ms")
}

// TestServerFaultWindow checks that a fault is injected only into the
// requests that arrive within [FaultAfter, FaultAfter+FaultFor) of the
// server's creation, with the configured Retry-After.
func TestServerFaultWindow(t *testing.T) {
	tests := []struct {
		name       string
		cfg        simhttp.Config
		at         []time.Duration // request times after NewServer
		want       []int
		retryAfter string // of the faulted answers
		retryMS    string
	}{
		{
			name: "rate limited for 2s after 1s",
			cfg:  simhttp.Config{Fault: simhttp.FaultRateLimited, FaultAfter: time.Second, FaultFor: 2 * time.Second},
			at:   []time.Duration{0, 999 * time.Millisecond, time.Second, 2999 * time.Millisecond, 3 * time.Second, time.Minute},
			want: []int{200, 200, 429, 429, 200, 200}, retryAfter: "1",
		},
		{
			name: "overloaded from the start for 1s, retry after 1.5s",
			cfg:  simhttp.Config{Fault: simhttp.FaultOverloaded, FaultFor: time.Second, RetryAfter: 1500 * time.Millisecond},
			at:   []time.Duration{0, 999 * time.Millisecond, time.Second},
			want: []int{503, 503, 200}, retryAfter: "2", retryMS: "1500",
		},
		{
			name: "rate limited forever after 1s, retry after 3s",
			cfg:  simhttp.Config{Fault: simhttp.FaultRateLimited, FaultAfter: time.Second, RetryAfter: 3 * time.Second},
			at:   []time.Duration{0, time.Second, time.Hour},
			want: []int{200, 429, 429}, retryAfter: "3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.cfg
				cfg.PrefillPerToken, cfg.DecodeStep, cfg.DecodeStepPerSeq = fast.PrefillPerToken, fast.DecodeStep, fast.DecodeStepPerSeq
				s, err := simhttp.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				begin := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1) // Run's result
				go func() { done <- s.Run(ctx) }()
				var got []int
				for _, at := range tt.at {
					time.Sleep(time.Until(begin.Add(at)))
					status, ra, ms := serve(t, s)
					got = append(got, status)
					if status != http.StatusOK && (ra != tt.retryAfter || ms != tt.retryMS) {
						t.Errorf("at %v: Retry-After %q, retry-after-ms %q; want %q and %q", at, ra, ms, tt.retryAfter, tt.retryMS)
					}
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("statuses by request time (-want +got):\n%s", diff)
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run() = %v, want nil", err)
				}
			})
		})
	}
}

func TestServerFaultWindowValidated(t *testing.T) {
	for _, cfg := range []simhttp.Config{{FaultAfter: -1}, {FaultFor: -time.Second}, {RetryAfter: -1}} {
		if _, err := simhttp.New(cfg); err == nil {
			t.Errorf("NewServer(%+v) = nil error, want one for the negative duration", cfg)
		}
	}
}
