package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// cannedServer answers every chat completion with "Paris.", streamed when
// asked to.
func cannedServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Par\"}}]}\n\n"+
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"is.\"},\"finish_reason\":\"stop\"}]}\n\n"+
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":2,\"total_tokens\":22,\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\n"+
				"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"qwen",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":16}}}`)
	}))
}

func Example() {
	srv := cannedServer() // stands in for a vLLM server
	defer srv.Close()

	cfg, err := openai.ParseURL("openai+" + srv.URL + "?model=qwen")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := openai.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "Answer in one word."},
			{Role: llm.RoleUser, Content: "Capital of France?"},
		},
		MaxTokens: 16,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s (%s) prompt=%d cached=%d completion=%d\n", resp.Message.Content, resp.FinishReason,
		resp.Usage.PromptTokens, resp.Usage.CachedTokens, resp.Usage.CompletionTokens)
	// Output: Paris. (stop) prompt=20 cached=16 completion=2
}

func ExampleModel_Stream() {
	srv := cannedServer()
	defer srv.Close()

	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "qwen", Flavor: openai.FlavorVLLM})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Capital of France?"}}}
	for ev, err := range m.Stream(context.Background(), req) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Type {
		case llm.EventText:
			fmt.Printf("text %q\n", ev.Text)
		case llm.EventUsage:
			fmt.Printf("usage %+v\n", ev.Usage)
		case llm.EventDone:
			fmt.Println("done:", ev.FinishReason)
		}
	}
	// Output:
	// text "Par"
	// text "is."
	// usage {PromptTokens:20 CompletionTokens:2 CachedTokens:16 CacheWriteTokens:0 MediaTokens:0}
	// done: stop
}

func ExampleParseURL() {
	for _, u := range []string{"openai://?model=gpt-4.1-mini", "vllm://gpu1?model=qwen", "llamacpp://", "sim+http://127.0.0.1:7070"} {
		cfg, err := openai.ParseURL(u)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s %s model=%q\n", cfg.Flavor, cfg.BaseURL, cfg.Model)
	}
	// Output:
	// openai https://api.openai.com/v1 model="gpt-4.1-mini"
	// vllm http://gpu1:8000/v1 model="qwen"
	// llamacpp http://127.0.0.1:8080/v1 model=""
	// sim http://127.0.0.1:7070/v1 model=""
}

// A user message with an image: Parts instead of Content. The flavor's
// Capabilities say, before any call, whether the server takes the part.
func ExampleModel_Generate_image() {
	srv := cannedServer() // stands in for a vLLM server with a vision model
	defer srv.Close()

	m, err := openai.New(openai.Config{Flavor: openai.FlavorVLLM, BaseURL: srv.URL + "/v1", Model: "qwen-vl"})
	if err != nil {
		fmt.Println(err)
		return
	}
	photo := llm.Part{Kind: llm.PartImage, URL: "https://cdn.example.com/eiffel.jpg", Detail: "low"}
	if err := m.Capabilities().Media.Accepts(photo); err != nil {
		fmt.Println(err)
		return
	}
	audio := llm.Part{Kind: llm.PartAudio, Data: []byte("RIFF"), MediaType: "audio/wav"}
	fmt.Println("audio:", m.Capabilities().Media.Accepts(audio))

	resp, err := m.Generate(context.Background(), &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			{Kind: llm.PartText, Text: "Which city is this? One word."},
			photo,
		}}},
		MaxTokens: 16,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Message.Content)
	// Output:
	// audio: the backend takes no audio parts as bytes
	// Paris.
}
