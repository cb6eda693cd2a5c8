package bedrock_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/llm"
)

// TestSamplingOnTheWire checks that the sampling parameters of a request
// reach Converse in its inferenceConfig (stop as stopSequences), zero
// values included; seed, which Converse lacks, is not sent.
func TestSamplingOnTheWire(t *testing.T) {
	user := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	tests := []struct {
		name string
		req  *llm.Request
		want map[string]any // inferenceConfig as the server received it
	}{
		{
			"all set",
			&llm.Request{Model: "m", Messages: user, MaxTokens: 64, Temperature: new(0.5), TopP: new(0.25), Seed: new(int64(42)), Stop: []string{"END", "\n\n"}},
			map[string]any{"maxTokens": 64.0, "temperature": 0.5, "topP": 0.25, "stopSequences": []any{"END", "\n\n"}},
		},
		{
			"zero values are sent",
			&llm.Request{Model: "m", Messages: user, MaxTokens: 8, Temperature: new(0.0), TopP: new(0.0), Seed: new(int64(0))},
			map[string]any{"maxTokens": 8.0, "temperature": 0.0, "topP": 0.0},
		},
		{"unset", &llm.Request{Model: "m", Messages: user, MaxTokens: 8}, map[string]any{"maxTokens": 8.0}},
	}
	for _, tt := range tests {
		body := captureRequest(t, tt.req)
		var sent struct {
			InferenceConfig map[string]any `json:"inferenceConfig"`
			Seed            any            `json:"seed"`
		}
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("%s: request body %s: %v", tt.name, body, err)
		}
		if diff := cmp.Diff(tt.want, sent.InferenceConfig); diff != "" {
			t.Errorf("%s: inferenceConfig sent (-want +got):\n%s\nbody: %s", tt.name, diff, body)
		}
		if sent.Seed != nil {
			t.Errorf("%s: body has a seed %v, which Converse does not take", tt.name, sent.Seed)
		}
	}
}
