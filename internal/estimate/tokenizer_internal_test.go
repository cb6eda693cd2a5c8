package estimate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// TestTokenizerFor: each backend's dry run counts with that backend's
// tokenizer, and the report's name says which.
func TestTokenizerFor(t *testing.T) {
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "You label reviews."}, {Role: llm.RoleUser, Content: "Label this review: works well, mostly"}},
		Tools:    []llm.ToolDef{{Name: "lookup", Description: "Look a product up.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}},
	}
	httpCount, err := simhttp.PromptTokens(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		url, model, name string
		count            int // 0: not checked
		sim              bool
	}{
		{"sim://?seed=1&tool_turns=2", "", "sim (", sim.PromptTokens(req), true},
		{"sim+http://127.0.0.1:8000", "", "sim+http (", httpCount, false},
		{"openai://api.openai.com", "gpt-4o", "tiktoken o200k_base (gpt-4o's own)", 0, false},
		{"vllm://127.0.0.1:8000", "llama-3.1-8b", "tiktoken o200k_base (standing in for llama-3.1-8b's own", 0, false},
	} {
		tk, err := tokenizerFor(tt.url, tt.model)
		if err != nil {
			t.Fatalf("tokenizerFor(%q): %v", tt.url, err)
		}
		if !strings.HasPrefix(tk.name, tt.name) {
			t.Errorf("tokenizerFor(%q) is %q, want %q…", tt.url, tk.name, tt.name)
		}
		if got := tk.Count(req); tt.count != 0 && got != tt.count {
			t.Errorf("tokenizerFor(%q).Count = %d, want the backend's %d", tt.url, got, tt.count)
		}
		if (tk.sim != nil) != tt.sim || tt.sim && tk.sim.ToolTurns != 2 {
			t.Errorf("tokenizerFor(%q): simulator config %+v, want one: %v (tool_turns 2)", tt.url, tk.sim, tt.sim)
		}
	}
	if _, err := tokenizerFor("sim://?bogus=1", ""); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("tokenizerFor(sim://?bogus=1) = %v, want an error naming the parameter", err)
	}
}

// TestSchemaTypical: each schema's typical answer is valid against it
// and sized between its short and its long answer.
func TestSchemaTypical(t *testing.T) {
	for _, raw := range answerSchemas {
		if raw == `true` {
			continue
		}
		s, err := schema.Compile(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("Compile(%s): %v", raw, err)
		}
		short, long, err := schemaAnswers(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{12, 40} {
			typ, err := schemaTypical(json.RawMessage(raw), size)
			if err != nil {
				t.Fatalf("schemaTypical(%s): %v", raw, err)
			}
			if _, err := s.Parse(typ); err != nil {
				t.Errorf("schemaTypical(%s, %d) = %s, invalid: %v", raw, size, typ, err)
			}
			if len(typ) < len(short) || len(typ) > len(long) {
				t.Errorf("schemaTypical(%s, %d) = %s (%d bytes), want between the short (%d) and the long answer (%d)", raw, size, typ, len(typ), len(short), len(long))
			}
		}
	}
}
