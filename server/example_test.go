package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// Example serves the simulator as model "sim" and one agent, and asks
// each for an answer.
func Example() {
	model, _ := sim.New(sim.Config{Seed: 1, ToolTurns: -1})
	engine, _ := batchagent.New(batchagent.Config{})
	spec, _ := batchagent.NewSpec(batchagent.Def{
		Model: model, Priority: batchagent.Interactive,
		Task:         "Classify: {input}",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"enum":["spam","ham"]}},"required":["label"]}`),
	})
	srv, err := server.New(server.Config{
		Engine:   engine,
		Backends: map[string]batchagent.Backend{"sim": {Model: model}},
		Agents:   map[string]*batchagent.Spec{"classifier": spec},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	for _, m := range []string{"sim", "agent:classifier"} {
		body := `{"model":"` + m + `","messages":[{"role":"user","content":"WIN A PRIZE"}]}`
		resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		var out struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		fmt.Println(m, resp.StatusCode, out.Choices[0].FinishReason, out.Choices[0].Message.Content != "")
	}
	// Output:
	// sim 200 stop true
	// agent:classifier 200 stop true
}
