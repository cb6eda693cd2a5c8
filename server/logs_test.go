package server_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// syncBuffer is a bytes.Buffer safe for the handler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsHoldNoSecret serves good and refused requests with a debug
// logger: the log names routes, models and key names, never a key nor the
// prompt's text.
func TestLogsHoldNoSecret(t *testing.T) {
	const prompt = "PROMPT-MARKER-7f3a secret plans"
	var logs syncBuffer
	m := newSim(t, sim.Config{Seed: 4})
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}},
		Keys:     []server.Key{{Name: "alice", SHA256: server.HashKey(testKey)}},
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if _, err := g.client(testKey).Chat.Completions.New(t.Context(), userParams("sim", prompt)); err != nil {
		t.Fatal(err)
	}
	wrong := "sk-wrong-key-0123456789"
	if _, err := g.client(wrong).Chat.Completions.New(t.Context(), userParams("sim", prompt)); err == nil {
		t.Fatal("a wrong key was accepted")
	}
	if _, err := g.client(testKey).Chat.Completions.New(t.Context(), userParams("nope", prompt)); err == nil {
		t.Fatal("an unknown model was accepted")
	}
	out := logs.String()
	if !strings.Contains(out, "alice") || !strings.Contains(out, "sim") {
		t.Fatalf("logs %q: want the key's name and the model named", out)
	}
	for _, secret := range []string{testKey, wrong, "PROMPT-MARKER", "secret plans", server.HashKey(testKey)} {
		if strings.Contains(out, secret) {
			t.Errorf("logs hold %q:\n%s", secret, out)
		}
	}
}
