package tokens_test

import (
	"encoding/json"
	"strings"
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
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 100)
	got := c.Count(&llm.Request{Messages: []llm.Message{{Content: long}}})
	// o200k_base reads each sentence as 10 tokens and the trailing space as
	// one more; the message framing adds 4. The bytes/4 estimate of a
	// tokenizer that failed to load would say 1129 instead.
	const want = 100*10 + 1 + 4
	if fallback := (len(long)+3)/4 + 4; got == fallback {
		t.Fatalf("Count(100 sentences) = %d, the bytes/4 fallback; want a real count of %d", got, want)
	}
	if got != want {
		t.Errorf("Count(100 sentences) = %d, want %d", got, want)
	}
}

// TestEncoding: a known model counts with its own vocabulary, another with
// o200k_base standing in, and Encoding and Known say which.
func TestEncoding(t *testing.T) {
	for _, tt := range []struct {
		model, encoding string
		known           bool
	}{
		{"gpt-4o", "o200k_base", true},
		{"gpt-4", "cl100k_base", true},
		{"llama-3.1-8b", "o200k_base", false},
	} {
		c, err := tokens.New(tt.model)
		if err != nil {
			t.Fatal(err)
		}
		if c.Encoding() != tt.encoding || c.Known() != tt.known {
			t.Errorf("New(%q): Encoding %q, Known %v; want %q, %v", tt.model, c.Encoding(), c.Known(), tt.encoding, tt.known)
		}
	}
}
