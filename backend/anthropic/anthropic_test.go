package anthropic_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		want    anthropic.Config
		wantErr string // a substring of the error; empty means no error
	}{
		{name: "hosted", url: "anthropic://", want: anthropic.Config{BaseURL: anthropic.DefaultBaseURL}},
		{name: "hosted without slashes", url: "anthropic:", want: anthropic.Config{BaseURL: anthropic.DefaultBaseURL}},
		{name: "hosted with a model", url: "anthropic://?model=claude-sonnet-4-5", want: anthropic.Config{BaseURL: anthropic.DefaultBaseURL, Model: "claude-sonnet-4-5"}},
		{name: "llama.cpp", url: "anthropic+http://127.0.0.1:8080", want: anthropic.Config{BaseURL: "http://127.0.0.1:8080"}},
		{name: "trailing slash dropped", url: "anthropic+http://localhost:11434/?model=stories", want: anthropic.Config{BaseURL: "http://localhost:11434", Model: "stories"}},
		{name: "https with a path", url: "anthropic+https://gateway.example:8443/llm/anthropic/", want: anthropic.Config{BaseURL: "https://gateway.example:8443/llm/anthropic"}},
		{
			name: "every parameter", url: "anthropic+http://h:1?model=m&max_tokens=512&concurrency=16",
			want: anthropic.Config{BaseURL: "http://h:1", Model: "m", MaxTokens: 512, Concurrency: 16},
		},
		{name: "batch mode", url: "anthropic://?mode=batch&model=m", want: anthropic.Config{BaseURL: anthropic.DefaultBaseURL, Model: "m", Mode: "batch"}},
		{name: "batch mode on a server", url: "anthropic+https://h/p?mode=batch", want: anthropic.Config{BaseURL: "https://h/p", Mode: "batch"}},
		{name: "batch mode over http", url: "anthropic+http://h:1?mode=batch", want: anthropic.Config{BaseURL: "http://h:1", Mode: "batch"}},
		{name: "unknown mode", url: "anthropic://?mode=bulk", wantErr: `mode = "bulk", want "batch"`},
		{name: "empty mode", url: "anthropic://?mode=", wantErr: `mode = "", want "batch"`},
		{name: "last value wins", url: "anthropic://?model=a&model=b", want: anthropic.Config{BaseURL: anthropic.DefaultBaseURL, Model: "b"}},

		{name: "unknown parameter", url: "anthropic://?modle=x", wantErr: `unknown parameter "modle"`},
		{name: "key as a parameter", url: "anthropic://?api_key=sk-1", wantErr: `unknown parameter "api_key"`},
		{name: "credentials", url: "anthropic+https://user:sk-secret@h", wantErr: "ANTHROPIC_API_KEY"},
		{name: "host on anthropic://", url: "anthropic://api.anthropic.com", wantErr: "anthropic+https://"},
		{name: "path on anthropic://", url: "anthropic:///v1", wantErr: "no host or path"},
		{name: "no host", url: "anthropic+http:///v1", wantErr: "without a host"},
		{name: "wrong scheme", url: "https://api.anthropic.com", wantErr: `scheme "https"`},
		{name: "not a URL", url: "anthropic+http://%zz", wantErr: "invalid backend URL"},
		{name: "key in an unparsable URL", url: "anthropic+http://u:sk-pw@h:port", wantErr: "invalid backend URL"},
		{name: "key in the fragment", url: "anthropic+https://h#sk-pw", wantErr: "fragment"},
		{name: "key in a parameter", url: "anthropic+https://h?key=sk-pw", wantErr: `unknown parameter "key"`},
		{name: "bad query", url: "anthropic://?model=%zz", wantErr: "query"},
		{name: "zero max_tokens", url: "anthropic://?max_tokens=0", wantErr: "max_tokens"},
		{name: "bad concurrency", url: "anthropic://?concurrency=many", wantErr: "concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := anthropic.ParseURL(tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ParseURL(%q) = %+v, %v; want an error containing %q", tt.url, got, err, tt.wantErr)
				}
				if err != nil && strings.Contains(err.Error(), "sk-") {
					t.Errorf("ParseURL(%q) error %q repeats a key", tt.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q) = %v", tt.url, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) (-want +got):\n%s", tt.url, diff)
			}
			if _, err := anthropic.New(got); err != nil {
				t.Errorf("New(ParseURL(%q)) = %v", tt.url, err)
			}
			if _, err := anthropic.NewBatch(got); err != nil {
				t.Errorf("NewBatch(ParseURL(%q)) = %v", tt.url, err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     anthropic.Config
		wantErr string
	}{
		{name: "zero Config"},
		{name: "relative base URL", cfg: anthropic.Config{BaseURL: "localhost:8080"}, wantErr: "base URL"},
		{name: "ftp base URL", cfg: anthropic.Config{BaseURL: "ftp://h"}, wantErr: "base URL"},
		{name: "credentials in the base URL", cfg: anthropic.Config{BaseURL: "https://u:p@h"}, wantErr: "credentials"},
		{name: "key in the base URL", cfg: anthropic.Config{BaseURL: "https://u:sk-pw@h"}, wantErr: "credentials"},
		{name: "key in an unparsable base URL", cfg: anthropic.Config{BaseURL: "https://u:sk-pw@h:port"}, wantErr: "base URL"},
		{name: "key in a relative base URL", cfg: anthropic.Config{BaseURL: "u:sk-pw@h"}, wantErr: "base URL"},
		{name: "key in the query", cfg: anthropic.Config{BaseURL: "https://h/llm?key=sk-pw"}, wantErr: "https://h has a query"},
		{name: "key in the fragment", cfg: anthropic.Config{BaseURL: "https://h#sk-pw"}, wantErr: "fragment"},
		{name: "negative max tokens", cfg: anthropic.Config{MaxTokens: -1}, wantErr: "max tokens"},
		{name: "negative concurrency", cfg: anthropic.Config{Concurrency: -1}, wantErr: "concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := anthropic.New(tt.cfg)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New(%+v) = %v, want error %q", tt.cfg, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "sk-") {
				t.Errorf("New(%+v) error %q repeats a credential", tt.cfg, err)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		name string
		cfg  anthropic.Config
		want int
	}{
		{name: "default", want: anthropic.DefaultConcurrency},
		{name: "configured", cfg: anthropic.Config{Concurrency: 32}, want: 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newModel(t, tt.cfg).Capabilities()
			want := llm.Capabilities{Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, DefaultConcurrency: tt.want,
				Media: llm.Media{Image: true, ImageURL: true, File: true, FileURL: true, FileID: true, Billing: "anthropic"},
				Extra: llm.ExtraFields{Translated: "parallel_tool_calls top_k user"}}
			if got != want {
				t.Errorf("Capabilities() = %+v, want %+v", got, want)
			}
		})
	}
}

// TestRateLimit reads the anthropic-ratelimit-* headers; reset instants
// become waits from now, under synctest's clock (2000-01-01 00:00 UTC).
func TestRateLimit(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   *llm.RateLimitInfo
	}{
		{
			name: "requests and tokens",
			header: http.Header{
				"Anthropic-Ratelimit-Requests-Limit":     {"50"},
				"Anthropic-Ratelimit-Requests-Remaining": {"0"},
				"Anthropic-Ratelimit-Requests-Reset":     {"2000-01-01T00:00:12Z"},
				"Anthropic-Ratelimit-Tokens-Limit":       {"80000"},
				"Anthropic-Ratelimit-Tokens-Remaining":   {"79000"},
				"Anthropic-Ratelimit-Tokens-Reset":       {"2000-01-01T00:01:00Z"},
				// Ignored while tokens-* is present.
				"Anthropic-Ratelimit-Input-Tokens-Limit":      {"1"},
				"Anthropic-Ratelimit-Output-Tokens-Limit":     {"16000"},
				"Anthropic-Ratelimit-Output-Tokens-Remaining": {"15500"},
				"Anthropic-Ratelimit-Output-Tokens-Reset":     {"2000-01-01T00:00:02Z"},
			},
			want: &llm.RateLimitInfo{LimitRequests: 50, RemainingRequests: 0, ResetRequests: 12 * time.Second,
				LimitTokens: 80000, RemainingTokens: 79000, ResetTokens: time.Minute,
				LimitOutputTokens: 16000, RemainingOutputTokens: 15500, ResetOutputTokens: 2 * time.Second},
		},
		{
			name: "input tokens only, a reset in the past",
			header: http.Header{
				"Anthropic-Ratelimit-Input-Tokens-Limit":     {"40000"},
				"Anthropic-Ratelimit-Input-Tokens-Remaining": {"39000"},
				"Anthropic-Ratelimit-Input-Tokens-Reset":     {"1999-12-31T23:59:00Z"},
			},
			want: &llm.RateLimitInfo{LimitTokens: 40000, RemainingTokens: 39000},
		},
		{
			name:   "malformed values are not reported",
			header: http.Header{"Anthropic-Ratelimit-Requests-Limit": {"lots"}, "Anthropic-Ratelimit-Requests-Reset": {"soon"}},
		},
		{name: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := jsonHeader.Clone()
				for k, v := range tt.header {
					h[k] = v
				}
				m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, h, readFile(t, "conformance", "plain.json"), nil)})
				resp, err := m.Generate(t.Context(), &llm.Request{Model: "m"})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, resp.RateLimit); diff != "" {
					t.Errorf("Generate: RateLimit (-want +got):\n%s", diff)
				}

				h.Set("Content-Type", "text/event-stream")
				m = newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, h, readFile(t, "conformance", "plain.sse"), nil)})
				evs, err := collect(m.Stream(t.Context(), &llm.Request{Model: "m"}))
				if err != nil {
					t.Fatal(err)
				}
				var first *llm.RateLimitInfo
				if evs[0].Type == llm.EventRateLimit {
					first = evs[0].RateLimit
				}
				if diff := cmp.Diff(tt.want, first); diff != "" {
					t.Errorf("Stream: first event %+v; RateLimit (-want +got):\n%s", evs[0], diff)
				}
			})
		})
	}
}

// TestRequestTarget checks where requests go and what credentials they
// carry: the Config's, never the SDK's environment defaults.
func TestRequestTarget(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://from-env.test")
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env")
	tests := []struct {
		name    string
		cfg     anthropic.Config
		wantURL string
		wantKey string
	}{
		{name: "base with a path", cfg: anthropic.Config{BaseURL: "http://gw.test/llm/anthropic", APIKey: "sk-1"}, wantURL: "http://gw.test/llm/anthropic/v1/messages", wantKey: "sk-1"},
		{name: "no key", cfg: anthropic.Config{BaseURL: "http://127.0.0.1:8080"}, wantURL: "http://127.0.0.1:8080/v1/messages"},
		{name: "hosted", cfg: anthropic.Config{APIKey: "sk-2"}, wantURL: "https://api.anthropic.com/v1/messages", wantKey: "sk-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *http.Request
			client := canned(200, jsonHeader, readFile(t, "conformance", "plain.json"), nil)
			inner := client.Transport
			client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) { got = r; return inner.RoundTrip(r) })
			tt.cfg.HTTPClient = client
			if _, err := newModel(t, tt.cfg).Generate(t.Context(), &llm.Request{Model: "m"}); err != nil {
				t.Fatal(err)
			}
			if got.URL.String() != tt.wantURL || got.Header.Get("X-Api-Key") != tt.wantKey || got.Header.Get("Authorization") != "" {
				t.Errorf("request to %s with x-api-key %q, authorization %q; want %s with %q and none",
					got.URL, got.Header.Get("X-Api-Key"), got.Header.Get("Authorization"), tt.wantURL, tt.wantKey)
			}
		})
	}
}
