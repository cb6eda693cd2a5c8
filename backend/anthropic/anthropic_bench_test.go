package anthropic_test

import (
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
)

// BenchmarkGenerate measures one call without the network: translating the
// ToolResult request, encoding it, and decoding the answer.
func BenchmarkGenerate(b *testing.B) {
	m := newModel(b, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, jsonHeader, readFile(b, "conformance", "tool_call.json"), nil)})
	req := backendtest.Request(backendtest.ToolResult)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Generate(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream measures a streamed call without the network: two tool
// calls whose arguments arrive in pieces.
func BenchmarkStream(b *testing.B) {
	body := readFile(b, "conformance", "tool_call.sse")
	m := newModel(b, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, sseHeader, body, nil)})
	req := backendtest.Request(backendtest.ToolCall)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range m.Stream(b.Context(), req) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
