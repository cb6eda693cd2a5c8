package anthropic_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Backend{
		Name: "anthropic",
		New: func(t *testing.T, baseURL string) llm.Model {
			return newModel(t, anthropic.Config{BaseURL: baseURL, APIKey: backendtest.APIKey})
		},
		Handler: fixture,
		// The fixtures' Plain answer reports 2 prompt tokens written to
		// the cache (cache_creation_input_tokens).
		PlainCacheWriteTokens: 2,
	})
}

// errorStatus is the HTTP status of each error scenario; its body is
// testdata/conformance/SCENARIO.json.
var errorStatus = map[backendtest.Scenario]int{
	backendtest.RateLimited:   http.StatusTooManyRequests,
	backendtest.Overloaded:    529,
	backendtest.ServerError:   http.StatusInternalServerError,
	backendtest.BadRequest:    http.StatusBadRequest,
	backendtest.ContextLength: http.StatusBadRequest,
	backendtest.Auth:          http.StatusUnauthorized,
}

// fixture serves scenario s as the Messages API does, from
// testdata/conformance: SCENARIO.json answers a plain call, SCENARIO.sse a
// streamed one, event by event, each event split across two writes.
// auth.json quotes the configured key, as some servers do.
func fixture(t *testing.T, s backendtest.Scenario, stream bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checkRequest(t, s, stream, r)
		if s == backendtest.KeyEcho {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": backendtest.KeyEchoMessage}})
			return
		}
		if status, ok := errorStatus[s]; ok {
			if s == backendtest.RateLimited {
				w.Header().Set("Retry-After", "2")
			}
			body := served(t, string(s)+".json")
			if s == backendtest.Auth && !strings.Contains(string(body), backendtest.APIKey) {
				t.Errorf("fixture auth.json does not quote backendtest.APIKey, so the suite cannot see it leak")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		if backendtest.IsMedia(s) {
			s = backendtest.Plain // answered as plain; the request was checked
		}
		w.Header().Set("Anthropic-Ratelimit-Requests-Limit", "50")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "49")
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(served(t, string(s)+".json"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		flusher := w.(http.Flusher)
		for ev := range strings.SplitAfterSeq(string(served(t, string(s)+".sse")), "\n\n") {
			half := len(ev) / 2
			for _, part := range []string{ev[:half], ev[half:]} {
				_, _ = io.WriteString(w, part)
				flusher.Flush()
			}
		}
		switch s {
		case backendtest.StreamCut:
			// Close the connection without the chunked body's end.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_ = conn.Close()
		case backendtest.Cancel:
			<-r.Context().Done()
		}
	})
}

// served returns testdata/conformance/name. It runs in a handler, where a
// test must not stop.
func served(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "conformance", name))
	if err != nil {
		t.Errorf("fixture: %v", err)
	}
	return b
}

// checkRequest checks the request of scenario s against
// testdata/conformance/SCENARIO.request.json (plain.request.json for
// scenarios that send the plain request); -update rewrites the files of
// the media scenarios.
func checkRequest(t *testing.T, s backendtest.Scenario, stream bool, r *http.Request) {
	t.Helper()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		t.Errorf("%s: request %s %s, want POST /v1/messages", s, r.Method, r.URL.Path)
	}
	if got := r.Header.Get("X-Api-Key"); got != backendtest.APIKey {
		t.Errorf("%s: x-api-key = %q, want the configured key", s, got)
	}
	if got := r.Header.Get("Anthropic-Version"); got == "" {
		t.Errorf("%s: no anthropic-version header", s)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("%s: content-type = %q, want application/json", s, got)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("%s: read request: %v", s, err)
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Errorf("%s: request body is not a JSON object: %v\n%s", s, err, body)
		return
	}
	if got, want := string(fields["stream"]), map[bool]string{true: "true"}[stream]; got != want {
		t.Errorf("%s: stream = %q, want %q", s, got, want)
	}
	delete(fields, "stream")
	got, _ := json.Marshal(fields)
	name := "plain"
	switch s {
	case backendtest.ToolCall, backendtest.ToolResult, backendtest.Structured:
		name = string(s)
	}
	if backendtest.IsMedia(s) {
		name = string(s)
		if *update {
			var buf bytes.Buffer
			_ = json.Indent(&buf, got, "", "  ")
			buf.WriteByte('\n')
			if err := os.WriteFile(filepath.Join("testdata", "conformance", name+".request.json"), buf.Bytes(), 0o644); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	}
	if diff := jsonDiff(t, served(t, name+".request.json"), got); diff != "" {
		t.Errorf("%s: request body (-want +got):\n%s", s, diff)
	}
}
