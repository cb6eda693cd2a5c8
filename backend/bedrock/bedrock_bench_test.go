package bedrock_test

import (
	"net/http"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

// BenchmarkStream decodes a ConverseStream answer of 200 text deltas and a
// tool call, served from memory.
func BenchmarkStream(b *testing.B) {
	body := messageStart(b)
	for range 200 {
		body = append(body, textDelta(b, 0, "token ")...)
	}
	for _, f := range [][]byte{blockStop(b, 0), toolStart(b, 1, "call_1", "read_file"), toolDelta(b, 1, `{"path":`), toolDelta(b, 1, `"a.go"}`), blockStop(b, 1), messageStop(b, "tool_use"), metadata(b)} {
		body = append(body, f...)
	}
	m := newModelWith(b, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: cannedClient(body)})
	req := backendtest.Request(backendtest.ToolCall)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range m.Stream(b.Context(), req) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		// 200 texts; the call's start, two argument deltas and its done;
		// usage; the end.
		if n != 206 {
			b.Fatalf("Stream() yielded %d events, want 206", n)
		}
	}
}

// BenchmarkGenerate builds a Converse request with tools and a tool result,
// signs it and decodes a tool-call answer, served from memory.
func BenchmarkGenerate(b *testing.B) {
	answer := []byte(converseBody(backendtest.ToolCall))
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: readCloser(answer), Request: r}, nil
	})}
	m := newModelWith(b, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: client})
	req := backendtest.Request(backendtest.ToolResult)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := m.Generate(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.FinishReason != llm.FinishToolCalls {
			b.Fatalf("Generate() finish %q, want tool_calls", resp.FinishReason)
		}
	}
}
