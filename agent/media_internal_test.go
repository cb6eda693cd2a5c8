package agent

import (
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// TestMediaInCompaction: a tool message's image counts in the estimate
// as providers bill it, and compaction replaces an older tool message's
// media with a note naming them.
func TestMediaInCompaction(t *testing.T) {
	img := llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_file", Parts: []llm.Part{
		{Kind: llm.PartText, Text: "photos/cat.png: image/png, 1024×1024"},
		{Kind: llm.PartImage, MediaType: "image/png", Width: 1024, Height: 1024, Ref: "photos/cat.png", Data: make([]byte, 4096)},
	}}
	// Anthropic's rule bills 1024×1024 as 1,398 tokens, OpenAI's as 765.
	if got := messageSize(&img); got < 1398 {
		t.Errorf("messageSize(image tool message) = %d, want at least 1398", got)
	}
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "Describe the photos."},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: []byte(`{"path":"photos/cat.png"}`)}}},
		img,
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c2", Name: "read_file", Arguments: []byte(`{"path":"photos/dog.png"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c2", Name: "read_file", Content: "small"},
	}
	out, changed := compact(msgs, 200, 400)
	if !changed {
		t.Fatalf("compact changed nothing; want the older image left out")
	}
	m := out[2]
	if len(m.Parts) != 0 || !strings.Contains(m.Content, "[image photos/cat.png (image/png) left out to fit the context window]") ||
		!strings.Contains(m.Content, "photos/cat.png: image/png, 1024×1024") {
		t.Errorf("compacted tool message = %+v, want its text and a note naming the image, no parts", m)
	}
	if len(msgs[2].Parts) != 2 {
		t.Errorf("compact modified its input")
	}
	if size(out) > 400 {
		t.Errorf("size after compaction = %d, want at most 400", size(out))
	}
}
