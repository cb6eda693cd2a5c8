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
	for ev, err := range e.Call(t.Context(), b, batchagent.Interactive, req, nil) {
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
	for range e.Call(ctx, b, batchagent.Interactive, req, nil) {
		break
	}
	if s := e.Stats(); s.Inflight != 0 {
		t.Fatalf("after a stopped Call: %d in flight, want 0", s.Inflight)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, err := range e.Call(ctx, b, batchagent.Interactive, req, nil) {
		if !errors.Is(err, batchagent.ErrShutdown) {
			t.Fatalf("Call after Shutdown = %v, want ErrShutdown", err)
		}
	}
}

// TestCallOnAdmit: OnAdmit is called once, as the call takes the slot and
// before its first event; a call waiting for the slot is not admitted
// until the slot frees, and one that ends waiting is never admitted.
func TestCallOnAdmit(t *testing.T) {
	m, err := sim.New(sim.Config{Latency: 50 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true}})
	if err != nil {
		t.Fatal(err)
	}
	b := batchagent.Backend{Model: m, Name: "sim"}
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "say something"}}, MaxTokens: 16}

	admits, events := 0, 0
	for _, err := range e.Call(t.Context(), b, batchagent.Interactive, req, &batchagent.CallOptions{OnAdmit: func() {
		if events != 0 {
			t.Errorf("OnAdmit after %d events, want before the first", events)
		}
		admits++
	}}) {
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		if events == 0 {
			// The slot is held: a second call waits, not admitted, until
			// its context ends.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			for _, err := range e.Call(ctx, b, batchagent.Interactive, req, &batchagent.CallOptions{OnAdmit: func() {
				t.Errorf("OnAdmit of a call that waited for a held slot until its context ended")
			}}) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("waiting Call = %v, want its context's deadline", err)
				}
			}
			cancel()
		}
		events++
	}
	if admits != 1 || events == 0 {
		t.Errorf("OnAdmit called %d times over %d events, want once", admits, events)
	}

	// A panic in OnAdmit goes on up, the slot freed.
	func() {
		defer func() {
			if v := recover(); v != "on admit" {
				t.Errorf("recovered %v, want OnAdmit's panic", v)
			}
		}()
		for range e.Call(t.Context(), b, batchagent.Interactive, req, &batchagent.CallOptions{OnAdmit: func() { panic("on admit") }}) {
			t.Error("an event after OnAdmit panicked")
		}
	}()
	if s := e.Stats(); s.Inflight != 0 {
		t.Errorf("after OnAdmit panicked: %d in flight, want 0", s.Inflight)
	}
	if err := e.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
