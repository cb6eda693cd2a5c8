package anthropic_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

// TestSamplingOnTheWire checks that the sampling parameters of a request
// reach the server as the Messages API names them (stop as
// stop_sequences), zero values included; seed, which the API lacks, is not
// sent.
func TestSamplingOnTheWire(t *testing.T) {
	user := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	tests := []struct {
		name string
		req  *llm.Request
		want map[string]any
	}{
		{
			"all set",
			&llm.Request{Model: "m", Messages: user, MaxTokens: 64, Temperature: new(0.2), TopP: new(0.9), Seed: new(int64(42)), Stop: []string{"END", "\n\n"}},
			map[string]any{"max_tokens": 64.0, "temperature": 0.2, "top_p": 0.9, "stop_sequences": []any{"END", "\n\n"}},
		},
		{
			"zero values are sent",
			&llm.Request{Model: "m", Messages: user, MaxTokens: 8, Temperature: new(0.0), TopP: new(0.0), Seed: new(int64(0))},
			map[string]any{"max_tokens": 8.0, "temperature": 0.0, "top_p": 0.0},
		},
		{"unset", &llm.Request{Model: "m", Messages: user, MaxTokens: 8}, map[string]any{"max_tokens": 8.0}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ = io.ReadAll(r.Body)
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write(readFile(t, "conformance", "plain.sse"))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(readFile(t, "conformance", "plain.json"))
			}))
			m := newModel(t, anthropic.Config{BaseURL: srv.URL, APIKey: backendtest.APIKey})
			var err error
			if stream {
				_, err = collect(m.Stream(t.Context(), tt.req))
			} else {
				_, err = m.Generate(t.Context(), tt.req)
			}
			srv.Close()
			if err != nil {
				t.Fatalf("%s (stream %v): %v", tt.name, stream, err)
			}
			var sent map[string]any
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatalf("%s: request body %s: %v", tt.name, body, err)
			}
			got := map[string]any{}
			for _, k := range []string{"max_tokens", "temperature", "top_p", "seed", "stop_sequences"} {
				if v, ok := sent[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (stream %v): sampling fields sent (-want +got):\n%s\nbody: %s", tt.name, stream, diff, body)
			}
		}
	}
}
