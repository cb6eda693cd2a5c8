package bedrock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

func Example() {
	// A stand-in for Bedrock's Converse API, so that the example runs
	// offline. Leave Endpoint and Credentials out to call AWS with the
	// default credential chain.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Paris."}]}},`+
			`"stopReason":"end_turn","metrics":{"latencyMs":180},`+
			`"usage":{"inputTokens":12,"outputTokens":3,"totalTokens":1039,"cacheReadInputTokens":1024}}`)
	}))
	defer srv.Close()

	ctx := context.Background()
	m, err := bedrock.New(ctx, bedrock.Config{
		Region:      "us-east-1",
		Model:       "anthropic.claude-3-5-haiku-20241022-v1:0",
		Endpoint:    srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(ctx, &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "Answer in one word."},
		{Role: llm.RoleUser, Content: "What is the capital of France?"},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Message.Content, resp.FinishReason)
	fmt.Printf("prompt %d tokens (%d cached), completion %d\n", resp.Usage.PromptTokens, resp.Usage.CachedTokens, resp.Usage.CompletionTokens)
	// Output:
	// Paris. stop
	// prompt 1036 tokens (1024 cached), completion 3
}

// This example asks a Claude model for a structured answer with tools: the
// output tool is offered beside them with toolChoice any, so the model
// either calls a tool or answers through the output tool. A stand-in for
// Converse calls the tool first, then answers.
func Example_toolsAndOutput() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages   []json.RawMessage
			ToolConfig struct {
				Tools      []struct{ ToolSpec struct{ Name string } }
				ToolChoice json.RawMessage
			}
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		var names []string
		for _, t := range req.ToolConfig.Tools {
			if t.ToolSpec.Name != "" {
				names = append(names, t.ToolSpec.Name)
			}
		}
		fmt.Printf("offered %v, toolChoice %s\n", names, req.ToolConfig.ToolChoice)
		call := `{"toolUse":{"toolUseId":"tooluse_1","name":"population","input":{"city":"Paris"}}}`
		if len(req.Messages) > 1 { // the tool's result came back
			call = `{"toolUse":{"toolUseId":"tooluse_2","name":"output","input":{"city":"Paris","population":2102650}}}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"output":{"message":{"role":"assistant","content":[%s]}},"stopReason":"tool_use",`+
			`"usage":{"inputTokens":12,"outputTokens":20,"totalTokens":32}}`, call)
	}))
	defer srv.Close()

	ctx := context.Background()
	m, err := bedrock.New(ctx, bedrock.Config{
		Region:      "us-east-1",
		Model:       "anthropic.claude-3-5-haiku-20241022-v1:0",
		Endpoint:    srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "How many people live in the capital of France?"}},
		Tools: []llm.ToolDef{{Name: "population", Description: "Look up a city's population.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"population":{"type":"integer"}}}`)},
	}
	resp, err := m.Generate(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.FinishReason, resp.Message.ToolCalls[0].Name, string(resp.Message.ToolCalls[0].Arguments))

	// The agent loop runs the tool and sends its result back.
	req.Messages = append(req.Messages, resp.Message,
		llm.Message{Role: llm.RoleTool, ToolCallID: resp.Message.ToolCalls[0].ID, Content: "2102650"})
	if resp, err = m.Generate(ctx, req); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.FinishReason, resp.Message.Content)
	// Output:
	// offered [population output], toolChoice {"any":{}}
	// tool_calls population {"city":"Paris"}
	// offered [population output], toolChoice {"any":{}}
	// stop {"city":"Paris","population":2102650}
}

func ExampleParseURL() {
	cfg, err := bedrock.ParseURL("bedrock://us-west-2?model=anthropic.claude-3-5-haiku-20241022-v1:0&concurrency=8")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Region, cfg.Model, cfg.Concurrency)

	_, err = bedrock.ParseURL("bedrock://us-west-2?temperature=0")
	fmt.Println(err)
	// Output:
	// us-west-2 anthropic.claude-3-5-haiku-20241022-v1:0 8
	// bedrock: unknown parameter "temperature" (known: model, endpoint, max_tokens, concurrency, cache)
}
