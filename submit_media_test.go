package batchagent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
)

// labeler is an llm.Model that takes images and answers {"label":"cat"},
// keeping the first user message of each request.
type labeler struct {
	mu    sync.Mutex
	first []llm.Message
}

func (m *labeler) Capabilities() llm.Capabilities {
	return llm.Capabilities{Media: llm.Media{Image: true}}
}

func (m *labeler) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleUser {
			m.first = append(m.first, msg)
			break
		}
	}
	m.mu.Unlock()
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: `{"label":"cat"}`}, FinishReason: llm.FinishStop}, nil
}

// TestSubmitMedia: an agent submitted with media gets them after its
// task's text in its first user message, and agents with media are never
// packed, even by a spec that packs.
func TestSubmitMedia(t *testing.T) {
	m := &labeler{}
	e := newEngine(t, batchagent.Config{})
	spec := mustSpec(t, batchagent.Def{Model: m, Task: "Label {id}.", Pack: batchagent.Pack{MaxAgents: 4},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`)})
	img := llm.Part{Kind: llm.PartImage, Data: []byte("\x89PNG"), MediaType: "image/png"}
	const n = 4
	var hs []*batchagent.Handle
	for i := range n {
		hs = append(hs, e.SubmitMedia(t.Context(), spec, batchagent.Input{"id": i}, []llm.Part{img}))
	}
	for i, h := range hs {
		r, err := h.Wait(t.Context())
		if err != nil || r.Err != nil || string(r.Output) != `{"label":"cat"}` || r.Packed != 0 {
			t.Fatalf("agent %d: %+v, %v", i, r, err)
		}
	}
	if len(m.first) != n {
		t.Fatalf("%d model calls, want %d (one per agent, none packed)", len(m.first), n)
	}
	for _, msg := range m.first {
		if msg.Role != llm.RoleUser || msg.Content != "" || len(msg.Parts) != 2 || msg.Parts[0].Kind != llm.PartText ||
			msg.Parts[1].Kind != llm.PartImage || string(msg.Parts[1].Data) != "\x89PNG" {
			t.Errorf("first message %+v", msg)
		}
	}
	if st := e.Stats(); st.PackCalls != 0 {
		t.Errorf("%d pack calls, want none", st.PackCalls)
	}
}
