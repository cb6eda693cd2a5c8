package anthropic

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// TestRateLimitHeaders parses Anthropic's documented anthropic-ratelimit-*
// headers (resets are RFC 3339 instants, turned into waits from now) and
// odd values.
func TestRateLimitHeaders(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    map[string]string
		want *llm.RateLimitInfo
	}{
		{"documented", map[string]string{
			"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
			"anthropic-ratelimit-requests-reset": "2026-11-29T12:00:01Z",
			"anthropic-ratelimit-tokens-limit":   "40000", "anthropic-ratelimit-tokens-remaining": "39000",
			"anthropic-ratelimit-tokens-reset": "2026-11-29T12:00:30.5Z",
		}, &llm.RateLimitInfo{LimitRequests: 50, RemainingRequests: 49, ResetRequests: time.Second,
			LimitTokens: 40000, RemainingTokens: 39000, ResetTokens: 30500 * time.Millisecond}},
		{"input tokens only", map[string]string{
			"anthropic-ratelimit-input-tokens-limit": "20000", "anthropic-ratelimit-input-tokens-remaining": "0",
			"anthropic-ratelimit-input-tokens-reset":  "2026-11-29T13:00:00+01:00",
			"anthropic-ratelimit-output-tokens-limit": "8000",
		}, &llm.RateLimitInfo{LimitTokens: 20000, LimitOutputTokens: 8000}},
		{"input and output tokens", map[string]string{
			"anthropic-ratelimit-requests-limit": "4000", "anthropic-ratelimit-requests-remaining": "3999",
			"anthropic-ratelimit-requests-reset":     "2026-11-29T12:00:00.015Z",
			"anthropic-ratelimit-input-tokens-limit": "2000000", "anthropic-ratelimit-input-tokens-remaining": "1998000",
			"anthropic-ratelimit-input-tokens-reset":  "2026-11-29T12:00:01Z",
			"anthropic-ratelimit-output-tokens-limit": "400000", "anthropic-ratelimit-output-tokens-remaining": "0",
			"anthropic-ratelimit-output-tokens-reset": "2026-11-29T12:00:09Z",
		}, &llm.RateLimitInfo{LimitRequests: 4000, RemainingRequests: 3999, ResetRequests: 15 * time.Millisecond,
			LimitTokens: 2000000, RemainingTokens: 1998000, ResetTokens: time.Second,
			LimitOutputTokens: 400000, RemainingOutputTokens: 0, ResetOutputTokens: 9 * time.Second}},
		{"output tokens only", map[string]string{
			"anthropic-ratelimit-output-tokens-remaining": "12", "anthropic-ratelimit-output-tokens-limit": "x",
		}, &llm.RateLimitInfo{RemainingOutputTokens: 12}},
		{"reset in the past", map[string]string{
			"anthropic-ratelimit-requests-reset": "2026-11-29T11:00:00Z",
		}, &llm.RateLimitInfo{}},
		{"odd values dropped", map[string]string{
			"anthropic-ratelimit-requests-limit": "-5", "anthropic-ratelimit-requests-reset": "in a minute",
			"anthropic-ratelimit-tokens-limit": "4e4",
		}, nil},
		{"none", map[string]string{"retry-after": "3"}, nil},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		got := rateLimit(h, now)
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

// FuzzRateLimitHeaders: any values parse without a panic into
// non-negative fields.
func FuzzRateLimitHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"50", "49", "2026-11-29T12:00:01Z"}, {"0", "0", "2026-11-29T13:00:00+01:00"},
		{"-1", "x", "yesterday"}, {"", "", ""}, {"9223372036854775807", "1", "9999-12-31T23:59:59Z"},
		{"1", "1", "0001-01-01T00:00:00Z"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, limit, remaining, reset string) {
		h := http.Header{}
		h.Set("anthropic-ratelimit-requests-limit", limit)
		h.Set("anthropic-ratelimit-input-tokens-remaining", remaining)
		h.Set("anthropic-ratelimit-requests-reset", reset)
		h.Set("anthropic-ratelimit-output-tokens-limit", remaining)
		h.Set("anthropic-ratelimit-output-tokens-remaining", limit)
		h.Set("anthropic-ratelimit-output-tokens-reset", reset)
		if rl := rateLimit(h, now); rl != nil && (rl.LimitRequests < 0 || rl.RemainingTokens < 0 || rl.ResetRequests < 0 ||
			rl.LimitOutputTokens < 0 || rl.RemainingOutputTokens < 0 || rl.ResetOutputTokens < 0) {
			t.Errorf("rateLimit(%q, %q, %q) = %+v: negative field", limit, remaining, reset, *rl)
		}
	})
}

// TestRateLimitOn429: a 429's anthropic-ratelimit-* headers reach the
// caller on the error.
func TestRateLimitOn429(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("anthropic-ratelimit-requests-limit", "50")
		h.Set("anthropic-ratelimit-requests-remaining", "0")
		h.Set("anthropic-ratelimit-requests-reset", time.Now().Add(time.Minute).UTC().Format(time.RFC3339))
		h.Set("retry-after", "2")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`))
	}))
	defer ts.Close()
	m, err := New(Config{BaseURL: ts.URL, Model: "claude-test", APIKey: "sk-ant-test", HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	rl := llm.RateLimitOf(err)
	if rl == nil || rl.LimitRequests != 50 || rl.RemainingRequests != 0 || rl.ResetRequests < 58*time.Second || rl.ResetRequests > time.Minute {
		t.Fatalf("Generate() = %v with rate limits %+v, want 50 requests, 0 left, reset in about a minute", err, rl)
	}
}
