package simhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// ExampleServer serves the simulator over HTTP and sends it one
// chat-completion request, as any OpenAI-compatible client would.
func ExampleServer() {
	s, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1) // Run's result
	go func() { ran <- s.Run(ctx) }()
	hs := httptest.NewServer(s)
	defer func() {
		cancel()
		<-ran
		hs.Close()
	}()

	body := `{"model":"sim","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."}]}`
	resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var answer struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, answer.Choices[0].FinishReason)
	fmt.Println(answer.Choices[0].Message.Content)
	fmt.Println(answer.Usage.PromptTokens, "prompt tokens,", answer.Usage.CompletionTokens, "completion tokens")
	// Output:
	// 200 stop
	// Done. orbit alpha prism prism raven willow maple cedar
	// 26 prompt tokens, 14 completion tokens
}
