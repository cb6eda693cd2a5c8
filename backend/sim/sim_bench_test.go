package sim_test

import (
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// benchSchema is a typical output schema: a verdict with a list of issues.
const benchSchema = `{"type":"object","properties":{"verdict":{"enum":["approve","reject","needs_work"]},"score":{"type":"integer","minimum":0,"maximum":10},"summary":{"type":"string"},"issues":{"type":"array","items":{"type":"object","properties":{"line":{"type":"integer","minimum":1},"message":{"type":"string"}},"required":["line","message"]},"maxItems":3}},"required":["verdict","score","summary","issues"]}`

func benchAnswerRequest() *llm.Request {
	return &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You review code."},
			{Role: llm.RoleUser, Content: "Review path: src/main.go and report issues."},
		},
		Output: &llm.OutputSpec{Schema: json.RawMessage(benchSchema)},
	}
}

// BenchmarkGenerateAnswer is one final answer of an agent: zero latency,
// output generated from a schema.
func BenchmarkGenerateAnswer(b *testing.B) {
	m := newModel(b, sim.Config{Seed: 1})
	req := benchAnswerRequest()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Generate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerateAnswerParallel is BenchmarkGenerateAnswer with every
// processor calling one shared model.
func BenchmarkGenerateAnswerParallel(b *testing.B) {
	m := newModel(b, sim.Config{Seed: 1})
	req := benchAnswerRequest()
	ctx := b.Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Generate(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkGenerateToolCall is an agent's first turn: two tool calls.
func BenchmarkGenerateToolCall(b *testing.B) {
	m := newModel(b, sim.Config{Seed: 1})
	req := &llm.Request{Messages: user("Review path: src/main.go please"), Tools: []llm.ToolDef{readFileTool, grepTool}}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Generate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamAnswer is BenchmarkGenerateAnswer through Stream and an
// llm.Accumulator.
func BenchmarkStreamAnswer(b *testing.B) {
	m := newModel(b, sim.Config{Seed: 1})
	req := benchAnswerRequest()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		var acc llm.Accumulator
		for ev, err := range m.Stream(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			acc.Add(ev)
		}
		if acc.Response().Message.Content == "" {
			b.Fatal("empty answer")
		}
	}
}

// BenchmarkPromptTokens counts a request's prompt tokens: text only (the
// path every text job takes on each call), and with a PNG's bytes.
func BenchmarkPromptTokens(b *testing.B) {
	text := benchAnswerRequest()
	withImage := benchAnswerRequest()
	withImage.Messages[1] = llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		{Kind: llm.PartText, Text: "Classify the photo."},
		{Kind: llm.PartImage, MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x04\x00\x00\x00\x03\x00\x08\x02\x00\x00\x00")},
	}}
	for _, bm := range []struct {
		name string
		req  *llm.Request
	}{{"text", text}, {"image", withImage}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sim.PromptTokens(bm.req)
			}
		})
	}
}
