package tokens_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
)

func TestCount(t *testing.T) {
	c, err := tokens.New("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *llm.Request
		want int
	}{
		{"empty", &llm.Request{}, 0},
		// "hello world" is two tokens in o200k_base, plus the message framing.
		{"one message", &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello world"}}}, 2 + 4},
		{"two messages", &llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "hello world"}, {Role: llm.RoleUser, Content: "hello world"}}}, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Count(tt.req); got != tt.want {
				t.Errorf("Count(%s) = %d, want %d", tt.name, got, tt.want)
			}
		})
	}
	withTools := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello world"}},
		Tools:    []llm.ToolDef{{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	if got := c.Count(withTools); got <= 6 {
		t.Errorf("Count(with tools) = %d, want more than the message alone (6)", got)
	}
}

func TestUnknownModelFallsBack(t *testing.T) {
	c, err := tokens.New("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	long := ""
	for range 100 {
		long += "The quick brown fox jumps over the lazy dog. "
	}
	got := c.Count(&llm.Request{Messages: []llm.Message{{Content: long}}})
	// About 10 tokens a sentence; a bytes/4 estimate would say 1125.
	if got < 900 || got > 1200 {
		t.Errorf("Count(100 sentences) = %d, want about 1000", got)
	}
}
