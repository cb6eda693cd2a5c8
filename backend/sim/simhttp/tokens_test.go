package simhttp_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// TestPromptTokens: PromptTokens is the prompt tokens the server reports
// for the same request sent by the OpenAI-compatible client.
func TestPromptTokens(t *testing.T) {
	ts := startServer(t, fast)
	m, err := openai.New(openai.Config{BaseURL: ts.url + "/v1", Flavor: openai.FlavorSim, APIKey: backendtest.APIKey, Model: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	tools := []llm.ToolDef{{Name: "read_file", Description: "Read a file.", Parameters: params}}
	first := []llm.Message{
		{Role: llm.RoleSystem, Content: "You review code."},
		{Role: llm.RoleUser, Content: "Review the file path: cache.go"},
	}
	after := append(append([]llm.Message{}, first...),
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0_0", Name: "read_file", Arguments: json.RawMessage(`{"path":"cache.go"}`)}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_0_0", Content: "package cache\n"},
	)
	out := &llm.OutputSpec{Name: "output", Schema: json.RawMessage(`{"type":"object","properties":{"risk":{"type":"string"}},"required":["risk"]}`)}
	for i, req := range []*llm.Request{
		{Messages: first, Tools: tools},
		{Messages: after, Tools: tools, Output: out},
		{Messages: first[1:]},
	} {
		resp, err := m.Generate(t.Context(), req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := simhttp.PromptTokens(req)
		if err != nil {
			t.Fatalf("request %d: PromptTokens: %v", i, err)
		}
		if int64(got) != resp.Usage.PromptTokens {
			t.Errorf("request %d: PromptTokens = %d, the server reports %d", i, got, resp.Usage.PromptTokens)
		}
	}
}
