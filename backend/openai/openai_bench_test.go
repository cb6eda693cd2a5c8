package openai_test

import (
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
)

// BenchmarkStream decodes a real llama.cpp stream (19 chunks with a usage
// chunk) through Stream, without network.
func BenchmarkStream(b *testing.B) {
	body := loadCapture(b, "llamacpp", "chat-stream-usage").body
	m := offlineModel(b, "text/event-stream", body)
	req := backendtest.Request(backendtest.Plain)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := collect(m.Stream(b.Context(), req)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamToolCalls decodes two tool calls streamed in 40
// argument fragments.
func BenchmarkStreamToolCalls(b *testing.B) {
	args := `{"path":"internal/very/long/path/to/some/file.go","pattern":"func [A-Z][a-zA-Z]*\\(","max":50}`
	var at []int
	for i := 4; i < len(args); i += 5 {
		at = append(at, i)
	}
	body := toolCallStream("grep", args, at, "grep", args, at)
	m := offlineModel(b, "text/event-stream", body)
	req := backendtest.Request(backendtest.ToolCall)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := collect(m.Stream(b.Context(), req)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerate encodes a tool-result request with structured output
// and decodes a plain answer, without network.
func BenchmarkGenerate(b *testing.B) {
	m := offlineModel(b, "application/json", readFile(b, "conformance", "plain.json"))
	req := backendtest.Request(backendtest.ToolResult)
	req.Output = backendtest.OutputSpec
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Generate(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
