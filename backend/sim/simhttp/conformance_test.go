package simhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// TestConformance runs the backend conformance suite against the simulator
// served over HTTP, through the OpenAI backend: the simulator speaks the
// wire format every OpenAI-compatible client expects, and produces each
// failure a real server does.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Backend{
		Name:             "sim",
		GeneratedContent: true,
		RetryAfter:       time.Second,
		New: func(t *testing.T, baseURL string) llm.Model {
			m, err := openai.New(openai.Config{BaseURL: baseURL + "/v1", Flavor: openai.FlavorSim, APIKey: backendtest.APIKey})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		Handler: func(t *testing.T, s backendtest.Scenario, stream bool) http.Handler {
			if s == backendtest.KeyEcho {
				// The simulator quotes no key: answer as an OpenAI-compatible
				// server that does.
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": backendtest.KeyEchoMessage}})
				})
			}
			cfg := simhttp.Config{
				Model:           sim.Config{Seed: 1},
				APIKey:          backendtest.APIKey,
				PrefillPerToken: time.Microsecond,
				DecodeStep:      time.Millisecond,
			}
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
				cfg.DecodeStep = 20 * time.Millisecond // several chunks before the cut
			case backendtest.Malformed:
				cfg.Fault = simhttp.FaultMalformed
			case backendtest.ContextLength:
				cfg.ContextWindow = 8 // the suite's prompt is longer
			case backendtest.Auth:
				cfg.APIKey = "a-different-key"
			case backendtest.Cancel:
				cfg.DecodeStep = 300 * time.Millisecond // the client leaves after the first token
			}
			srv, err := simhttp.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = srv.Run(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })
			return srv
		},
	})
}
