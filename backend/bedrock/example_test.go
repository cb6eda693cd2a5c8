package bedrock_test

import (
	"context"
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
