package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

// This example points the backend at a server that speaks the Messages API
// (here a canned one; in production anthropic:// or a llama.cpp or Ollama
// server) and asks for a structured answer, which comes back as JSON text.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ToolChoice struct{ Name string } `json:"tool_choice"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		// The answer is the input of the forced tool.
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","content":[`+
			`{"type":"tool_use","id":"toolu_1","name":%q,"input":{"city": "Paris", "population": 2102650}}],`+
			`"stop_reason":"tool_use","usage":{"input_tokens":12,"cache_read_input_tokens":300,"output_tokens":20}}`, req.ToolChoice.Name)
	}))
	defer srv.Close()

	cfg, err := anthropic.ParseURL("anthropic+" + srv.URL + "?model=claude-haiku-4-5")
	if err != nil {
		log.Fatal(err)
	}
	cfg.APIKey = "sk-ant-example" // from ANTHROPIC_API_KEY in the CLI
	m, err := anthropic.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "Answer with facts."},
			{Role: llm.RoleUser, Content: "What is the capital of France?"},
		},
		Output: &llm.OutputSpec{Name: "city", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"population":{"type":"integer"}}}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Message.Content)
	fmt.Println(resp.FinishReason, resp.Usage.PromptTokens, resp.Usage.CachedTokens, resp.Usage.CompletionTokens)
	// Output:
	// {"city":"Paris","population":2102650}
	// stop 312 300 20
}
