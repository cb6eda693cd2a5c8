package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/backendtest"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
)

// TestConformance: the gateway is itself a conformant backend. Our openai
// client, pointed at the gateway in front of the HTTP simulator, passes
// the backend suite: each upstream failure reaches the client with the
// class it had upstream (429 with its Retry-After, 503, 500, 400,
// context length; a malformed chunk becomes an error event), the
// gateway's own 401 is an auth error, and a client that leaves mid-stream
// is let go at once. A stream cut upstream is not cut downstream: the
// gateway ends it with an error event, so that a client tells it from a
// whole answer (TestStreamCutUpstream), which our client classes as a
// server failure, transient like a cut connection, not as one.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Backend{
		Name:             "openai",
		GeneratedContent: true,
		RetryAfter:       time.Second,
		Skip: map[backendtest.Scenario]string{
			backendtest.StreamCut: "the gateway ends a stream cut upstream with an error event (TestStreamCutUpstream)",
		},
		New: func(t *testing.T, baseURL string) llm.Model {
			m, err := backendopenai.New(backendopenai.Config{BaseURL: baseURL + "/v1", APIKey: backendtest.APIKey})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		Handler: func(t *testing.T, s backendtest.Scenario, stream bool) http.Handler {
			var upstream http.Handler
			if s == backendtest.KeyEcho {
				upstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": backendtest.KeyEchoMessage}})
				})
			} else {
				cfg := simhttp.Config{Model: sim.Config{Seed: 1}, PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond}
				switch s {
				case backendtest.RateLimited:
					cfg.Fault = simhttp.FaultRateLimited
				case backendtest.Overloaded:
					cfg.Fault = simhttp.FaultOverloaded
				case backendtest.ServerError:
					cfg.Fault = simhttp.FaultServerError
				case backendtest.BadRequest:
					cfg.Fault = simhttp.FaultBadRequest
				case backendtest.StreamCut:
					cfg.Fault = simhttp.FaultStreamCut
					cfg.DecodeStep = 20 * time.Millisecond
				case backendtest.Malformed:
					cfg.Fault = simhttp.FaultMalformed
				case backendtest.ContextLength:
					cfg.ContextWindow = 8
				case backendtest.Cancel:
					cfg.DecodeStep = 300 * time.Millisecond
				}
				srv, err := simhttp.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); _ = srv.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
				upstream = srv
			}
			hs := httptest.NewServer(upstream)
			t.Cleanup(hs.Close)
			// The gateway's own client upstream: the generic flavor, so no
			// queue probe reaches the fixtures.
			up, err := backendopenai.New(backendopenai.Config{BaseURL: hs.URL + "/v1", APIKey: backendtest.APIKey})
			if err != nil {
				t.Fatal(err)
			}
			key := backendtest.APIKey
			if s == backendtest.Auth {
				key = "a-different-key"
			}
			e, err := batchagent.New(batchagent.Config{})
			if err != nil {
				t.Fatal(err)
			}
			g, err := server.New(server.Config{
				Engine:   e,
				Backends: map[string]batchagent.Backend{backendtest.ModelName: {Model: up, Name: backendtest.ModelName}},
				Keys:     []server.Key{{SHA256: server.HashKey(key)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = g.Shutdown(ctx)
			})
			return g
		},
	})
}
