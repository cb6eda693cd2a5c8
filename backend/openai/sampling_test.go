package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// TestSamplingOnTheWire checks that the sampling parameters of a request
// reach the server as the Chat Completions API names them, zero values
// included, and that none is sent when the request leaves them unset.
func TestSamplingOnTheWire(t *testing.T) {
	user := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	tests := []struct {
		name string
		req  *llm.Request
		want map[string]any // the sampling fields of the body
	}{
		{
			"all set",
			&llm.Request{Model: "m", Messages: user, MaxTokens: 64, Temperature: new(0.2), TopP: new(0.9), Seed: new(int64(42)), Stop: []string{"END", "\n\n"}},
			map[string]any{"max_tokens": 64.0, "temperature": 0.2, "top_p": 0.9, "seed": 42.0, "stop": []any{"END", "\n\n"}},
		},
		{
			"zero values are sent",
			&llm.Request{Model: "m", Messages: user, Temperature: new(0.0), TopP: new(0.0), Seed: new(int64(0))},
			map[string]any{"temperature": 0.0, "top_p": 0.0, "seed": 0.0},
		},
		{"unset", &llm.Request{Model: "m", Messages: user}, map[string]any{}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			body := sentBody(t, openai.Config{Flavor: openai.FlavorVLLM, APIKey: backendtest.APIKey}, tt.req, stream)
			var sent map[string]any
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatalf("%s: request body %s: %v", tt.name, body, err)
			}
			got := map[string]any{}
			for _, k := range []string{"max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop"} {
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
