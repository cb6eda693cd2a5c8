package simhttp_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestServerRateLimits sends more requests than a minute's budget at once:
// the first ones pass with x-ratelimit-* headers counting down, the next
// is answered 429 with a Retry-After and the headers, and Stats counts it.
func TestServerRateLimits(t *testing.T) {
	cfg := fast
	cfg.RPM, cfg.TPM = 3, 1_000_000
	ts := startServer(t, cfg)
	ctx := context.Background()
	b := request("You are terse.", "Say hi.")
	for i := range 3 {
		resp := ts.post(t, ctx, b)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
		if got := h.Get("x-ratelimit-limit-requests"); got != "3" {
			t.Errorf("request %d: x-ratelimit-limit-requests = %q, want 3", i, got)
		}
		if got, want := h.Get("x-ratelimit-remaining-requests"), strconv.Itoa(2-i); got != want {
			t.Errorf("request %d: x-ratelimit-remaining-requests = %q, want %s", i, got, want)
		}
		if got := h.Get("x-ratelimit-limit-tokens"); got != "1000000" {
			t.Errorf("request %d: x-ratelimit-limit-tokens = %q, want 1000000", i, got)
		}
		rem, err := strconv.Atoi(h.Get("x-ratelimit-remaining-tokens"))
		if err != nil || rem >= 1_000_000 || rem < 1_000_000-1000*(i+1) {
			t.Errorf("request %d: x-ratelimit-remaining-tokens = %q, want a little under 1000000", i, h.Get("x-ratelimit-remaining-tokens"))
		}
		// One request is earned back in 20s: the bucket is full again
		// after 20s per request taken (less the few ms since).
		d, err := time.ParseDuration(h.Get("x-ratelimit-reset-requests"))
		if want := time.Duration(i+1) * 20 * time.Second; err != nil || d > want || d < want-time.Second {
			t.Errorf("request %d: x-ratelimit-reset-requests = %q, want about %v", i, h.Get("x-ratelimit-reset-requests"), want)
		}
	}
	resp := ts.post(t, ctx, b)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429", resp.StatusCode)
	}
	checkError(t, data, "requests", "rate_limit_exceeded")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 19 || ra > 20 {
		t.Errorf("Retry-After = %q, want 19 or 20 (seconds until one request is earned)", resp.Header.Get("Retry-After"))
	}
	if got := resp.Header.Get("x-ratelimit-remaining-requests"); got != "0" {
		t.Errorf("429's x-ratelimit-remaining-requests = %q, want 0", got)
	}
	if st := ts.Stats(); st.RateLimited != 1 || st.Requests != 4 {
		t.Errorf("Stats: RateLimited %d, Requests %d; want 1, 4", st.RateLimited, st.Requests)
	}
}

// TestServerTokenLimit: a request over the token budget is answered 429 of
// type "tokens".
func TestServerTokenLimit(t *testing.T) {
	cfg := fast
	cfg.TPM = 40
	ts := startServer(t, cfg)
	b := request("You are terse.", "Say hi.")
	codes := []int{}
	for range 4 {
		resp := ts.post(t, context.Background(), b)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			checkError(t, data, "tokens", "rate_limit_exceeded")
			if resp.Header.Get("x-ratelimit-limit-tokens") != "40" || resp.Header.Get("x-ratelimit-limit-requests") != "" {
				t.Errorf("429 headers %v, want the token limit 40 and no request limit", resp.Header)
			}
			return
		}
	}
	t.Fatalf("statuses %v within a 40-token budget, want a 429", codes)
}

func TestServerRateLimitConfig(t *testing.T) {
	if _, err := simhttp.New(simhttp.Config{RPM: -1}); err == nil {
		t.Error("New(RPM -1) = nil error, want one")
	}
}
