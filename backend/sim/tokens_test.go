package sim_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// tokenRequests are requests of the shapes an agent sends: a first
// request, one after a tool turn, one with an output schema, one without
// tools.
func tokenRequests() []*llm.Request {
	params := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	tools := []llm.ToolDef{{Name: "read_file", Description: "Read a file of the repository.", Parameters: params}}
	first := []llm.Message{
		{Role: llm.RoleSystem, Content: "You review code. Answer in JSON."},
		{Role: llm.RoleUser, Content: "Review the file path: cache.go"},
	}
	after := append(append([]llm.Message{}, first...),
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0_0", Name: "read_file", Arguments: json.RawMessage(`{"path":"cache.go"}`)}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_0_0", Content: "package cache\n\n// Cache holds values.\ntype Cache struct{}\n"},
	)
	out := &llm.OutputSpec{Name: "output", Schema: json.RawMessage(`{"type":"object","properties":{"risk":{"type":"string"}},"required":["risk"]}`)}
	return []*llm.Request{
		{Messages: first, Tools: tools},
		{Messages: after, Tools: tools, Output: out},
		{Messages: first[1:], Output: out},
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: "héllo, wörld"}}},
	}
}

// TestPromptTokens: PromptTokens is what the simulator reports as the
// prompt tokens of the same request, and TextTokens its completion tokens
// of a text answer.
func TestPromptTokens(t *testing.T) {
	m, err := sim.New(sim.Config{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range tokenRequests() {
		resp, err := m.Generate(t.Context(), req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got, want := sim.PromptTokens(req), resp.Usage.PromptTokens; int64(got) != want {
			t.Errorf("request %d: PromptTokens = %d, the simulator reports %d", i, got, want)
		}
		if len(resp.Message.ToolCalls) > 0 {
			continue
		}
		if got, want := sim.TextTokens(resp.Message.Content), resp.Usage.CompletionTokens; int64(got) != want {
			t.Errorf("request %d: TextTokens(%q) = %d, the simulator reports %d", i, resp.Message.Content, got, want)
		}
	}
}
