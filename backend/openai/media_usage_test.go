package openai_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// TestMediaTokensFromUsage: the part of the prompt that is media comes
// from the server's usage, whole and streamed: OpenAI's
// prompt_tokens_details.audio_tokens, or batchagent's own media_tokens
// (the simulator's and the gateway's), the larger of the two; none when
// neither is sent.
func TestMediaTokensFromUsage(t *testing.T) {
	tests := []struct {
		name, details string
		want          int64
	}{
		{"audio_tokens", `{"cached_tokens":0,"audio_tokens":120}`, 120},
		{"media_tokens", `{"cached_tokens":16,"media_tokens":765}`, 765},
		{"both", `{"audio_tokens":120,"media_tokens":885}`, 885},
		{"none", `{"cached_tokens":16}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			usage := `"usage":{"prompt_tokens":1000,"completion_tokens":7,"total_tokens":1007,"prompt_tokens_details":` + tt.details + `}`
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-audio-preview","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` + usage + `}`))
			}))
			defer srv.Close()
			m := newModel(t, openai.Config{Flavor: openai.FlavorOpenAI, BaseURL: srv.URL + "/v1", Model: "gpt-4o-audio-preview"})
			resp, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 10})
			if err != nil {
				t.Fatalf("Generate = %v", err)
			}
			if resp.Usage.MediaTokens != tt.want || resp.Usage.PromptTokens != 1000 {
				t.Errorf("usage %+v, want media tokens %d of 1000 prompt tokens", resp.Usage, tt.want)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n" +
				"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":7,\"total_tokens\":1007,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":240}}}\n\n" +
				"data: [DONE]\n\n"))
		}))
		defer srv.Close()
		m := newModel(t, openai.Config{Flavor: openai.FlavorOpenAI, BaseURL: srv.URL + "/v1", Model: "m"})
		var got llm.Usage
		for ev, err := range m.Stream(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 10}) {
			if err != nil {
				t.Fatalf("Stream = %v", err)
			}
			if ev.Type == llm.EventUsage || ev.Type == llm.EventDone {
				if ev.Usage.PromptTokens > 0 {
					got = ev.Usage
				}
			}
		}
		if got.MediaTokens != 240 || got.PromptTokens != 1000 {
			t.Errorf("streamed usage %+v, want 240 media tokens of 1000", got)
		}
	})
}
