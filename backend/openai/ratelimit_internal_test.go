package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// TestRateLimitHeaders parses OpenAI's documented x-ratelimit-* values and
// odd ones: bad numbers and durations are dropped, not guessed.
func TestRateLimitHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    map[string]string
		want *llm.RateLimitInfo
	}{
		{"documented", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
			"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
			"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
		}, &llm.RateLimitInfo{LimitRequests: 60, LimitTokens: 150000, RemainingRequests: 59, RemainingTokens: 149984,
			ResetRequests: time.Second, ResetTokens: 6 * time.Minute}},
		{"fractions and hours", map[string]string{
			"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "1h2m3.5s",
		}, &llm.RateLimitInfo{ResetRequests: 20 * time.Millisecond, ResetTokens: time.Hour + 2*time.Minute + 3500*time.Millisecond}},
		{"seconds as a number, spaces", map[string]string{
			"x-ratelimit-limit-requests": " 500 ", "x-ratelimit-reset-requests": "0.5",
		}, &llm.RateLimitInfo{LimitRequests: 500, ResetRequests: 500 * time.Millisecond}},
		{"remaining zero", map[string]string{
			"x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "0",
		}, &llm.RateLimitInfo{LimitRequests: 3}},
		{"odd values dropped", map[string]string{
			"x-ratelimit-limit-requests": "-1", "x-ratelimit-limit-tokens": "1e6",
			"x-ratelimit-remaining-requests": "many", "x-ratelimit-reset-requests": "-2s",
			"x-ratelimit-reset-tokens": "1d", "x-ratelimit-remaining-tokens": "99999999999999999999",
		}, nil},
		{"none", map[string]string{"retry-after": "1"}, nil},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		got := rateLimit(h)
		switch {
		case got == nil || tc.want == nil:
			if (got == nil) != (tc.want == nil) {
				t.Errorf("%s: rateLimit = %+v, want %+v", tc.name, got, tc.want)
			}
		case *got != *tc.want:
			t.Errorf("%s: rateLimit = %+v, want %+v", tc.name, *got, *tc.want)
		}
	}
}

// FuzzRateLimitHeaders: any header values parse without a panic into
// non-negative fields, and into nil only when no value was valid.
func FuzzRateLimitHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"60", "59", "1s"}, {"150000", "149984", "6m0s"}, {"3", "0", "20ms"},
		{"-1", "x", "-1s"}, {"", "", ""}, {"9223372036854775807", "1", "2562047h47m16.854775807s"},
		{"1", "1", "1e300"}, {"0", "0", "0.000000001"}, {"7", "7", "NaN"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, limit, remaining, reset string) {
		h := http.Header{}
		h.Set("x-ratelimit-limit-requests", limit)
		h.Set("x-ratelimit-remaining-tokens", remaining)
		h.Set("x-ratelimit-reset-tokens", reset)
		rl := rateLimit(h)
		if rl == nil {
			return
		}
		if rl.LimitRequests < 0 || rl.RemainingTokens < 0 || rl.ResetTokens < 0 {
			t.Errorf("rateLimit(%q, %q, %q) = %+v: negative field", limit, remaining, reset, *rl)
		}
		// All zero only when a value was a valid zero ("0", "00", " +0").
		zero := func(v string) bool {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return err == nil && n == 0
		}
		if *rl == (llm.RateLimitInfo{}) && !zero(limit) && !zero(remaining) && reset == "" {
			t.Errorf("rateLimit(%q, %q, %q) = all zero, want nil", limit, remaining, reset)
		}
	})
}

// TestRateLimitOn429: a 429's headers reach the caller on the error.
func TestRateLimitOn429(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("x-ratelimit-limit-requests", "600")
		h.Set("x-ratelimit-remaining-requests", "0")
		h.Set("x-ratelimit-reset-requests", "100ms")
		h.Set("Retry-After", "1")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`))
	}))
	defer ts.Close()
	m, err := New(Config{Model: "gpt-test", BaseURL: ts.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	rl := llm.RateLimitOf(err)
	if rl == nil || rl.LimitRequests != 600 || rl.RemainingRequests != 0 || rl.ResetRequests != 100*time.Millisecond {
		t.Fatalf("Generate() = %v with rate limits %+v, want 600 requests, 0 left, reset 100ms", err, rl)
	}
	if llm.RetryAfter(err) != time.Second {
		t.Errorf("RetryAfter = %v, want 1s", llm.RetryAfter(err))
	}
}
