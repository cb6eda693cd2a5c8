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

// This example asks for a structured answer with tools: the output tool is
// offered beside them with tool_choice any, so the model either calls a
// tool or answers through the output tool. A stand-in server calls the
// tool first, then answers.
func Example_toolsAndOutput() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tools      []struct{ Name string }
			ToolChoice struct{ Type string } `json:"tool_choice"`
			Messages   []json.RawMessage
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		fmt.Printf("offered %v, tool_choice %s\n", req.Tools, req.ToolChoice.Type)
		call := `{"type":"tool_use","id":"toolu_1","name":"population","input":{"city":"Paris"}}`
		if len(req.Messages) > 1 { // the tool's result came back
			call = `{"type":"tool_use","id":"toolu_2","name":"output","input":{"city":"Paris","population":2102650}}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","content":[%s],`+
			`"stop_reason":"tool_use","usage":{"input_tokens":12,"output_tokens":20}}`, call)
	}))
	defer srv.Close()

	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "claude-haiku-4-5"})
	if err != nil {
		log.Fatal(err)
	}
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "How many people live in the capital of France?"}},
		Tools: []llm.ToolDef{{Name: "population", Description: "Look up a city's population.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"population":{"type":"integer"}}}`)},
	}
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.FinishReason, resp.Message.ToolCalls[0].Name, string(resp.Message.ToolCalls[0].Arguments))

	// The agent loop runs the tool and sends its result back.
	req.Messages = append(req.Messages, resp.Message,
		llm.Message{Role: llm.RoleTool, ToolCallID: resp.Message.ToolCalls[0].ID, Content: "2102650"})
	resp, err = m.Generate(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.FinishReason, resp.Message.Content)
	// Output:
	// offered [{population} {output}], tool_choice any
	// tool_calls population {"city":"Paris"}
	// offered [{population} {output}], tool_choice any
	// stop {"city":"Paris","population":2102650}
}
