package batchagent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

func TestCallThroughTheGate(t *testing.T) {
	m, err := sim.New(sim.Config{Latency: 50 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
	if err != nil {
		t.Fatal(err)
	}
	b := batchagent.Backend{Model: m, Name: "sim"}
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "say something"}}, MaxTokens: 64}
	var text strings.Builder
	var done, usage bool
	for ev, err := range e.Call(t.Context(), b, batchagent.Interactive, req) {
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		switch ev.Type {
		case llm.EventText:
			text.WriteString(ev.Text)
		case llm.EventUsage:
			usage = ev.Usage.CompletionTokens > 0
		case llm.EventDone:
			done = true
		}
	}
	if text.Len() == 0 || !done || !usage {
		t.Fatalf("Call yielded text %q, done %t, usage %t; want all", text.String(), done, usage)
	}
	st := e.Stats()
	if len(st.Backends) != 1 || st.Backends[0].Limit != 1 || st.Inflight != 0 {
		t.Fatalf("after Call: %+v; want the one backend, its slot free", st.Backends)
	}

	// Stopping the iteration frees the slot at once: a second call gets it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range e.Call(ctx, b, batchagent.Interactive, req) {
		break
	}
	if s := e.Stats(); s.Inflight != 0 {
		t.Fatalf("after a stopped Call: %d in flight, want 0", s.Inflight)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, err := range e.Call(ctx, b, batchagent.Interactive, req) {
		if !errors.Is(err, batchagent.ErrShutdown) {
			t.Fatalf("Call after Shutdown = %v, want ErrShutdown", err)
		}
	}
}
