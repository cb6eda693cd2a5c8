package anthropic_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

// capture is a response recorded from a real server with curl -i -N: the
// status line, the headers and the raw body (SSE byte for byte).
type capture struct {
	status int
	header http.Header
	body   []byte
}

// readCapture reads testdata/wire/NAME.response.
func readCapture(t testing.TB, name string) capture {
	t.Helper()
	raw := readFile(t, "wire", name+".response")
	head, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("%s: no blank line after the headers", name)
	}
	lines := strings.Split(string(head), "\r\n")
	proto, rest, _ := strings.Cut(lines[0], " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if err != nil || !strings.HasPrefix(proto, "HTTP/") {
		t.Fatalf("%s: status line %q", name, lines[0])
	}
	c := capture{status: status, header: http.Header{}, body: body}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ":")
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive":
			// Hop by hop: the replaying server sets its own.
		default:
			c.header.Add(k, strings.TrimSpace(v))
		}
	}
	return c
}

// replay serves the capture NAME to every POST /v1/messages.
func replay(t *testing.T, name string) *httptest.Server {
	t.Helper()
	c := readCapture(t, name)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.URL.Path)
		}
		for k, v := range c.header {
			w.Header()[k] = v
		}
		w.WriteHeader(c.status)
		_, _ = w.Write(c.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// storyRequest is the request of the captures: a storyteller asked for a
// story, at temperature 0.
func storyRequest(animal string, maxTokens int) *llm.Request {
	zero := 0.0
	return &llm.Request{
		Model:     "stories",
		MaxTokens: maxTokens,
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are a storyteller. Answer briefly."},
			{Role: llm.RoleUser, Content: "Tell a story about a " + animal + "."},
		},
		Temperature: &zero,
	}
}

func TestWireCaptures(t *testing.T) {
	tests := []struct {
		name    string
		capture string
		stream  bool
		req     *llm.Request
		want    string
		usage   llm.Usage
	}{
		{
			name: "llama.cpp plain", capture: "llamacpp/anthropic-plain", req: storyRequest("cat", 24),
			want:  "\"Here,\" Annabyed.\nThe cat was very sm",
			usage: llm.Usage{PromptTokens: 103, CompletionTokens: 24, CachedTokens: 43},
		},
		{
			name: "llama.cpp stream", capture: "llamacpp/anthropic-stream", stream: true, req: storyRequest("dog", 16),
			want:  "\"Here,\" Annack.\nThe",
			usage: llm.Usage{PromptTokens: 103, CompletionTokens: 16, CachedTokens: 75},
		},
		{
			name: "Ollama plain", capture: "ollama/anthropic-plain", req: storyRequest("cat", 24),
			want:  "\"Hello, Cat! I'm sorry for you. What",
			usage: llm.Usage{PromptTokens: 71, CompletionTokens: 24},
		},
		{
			// Ollama's message_start reports 16 input tokens, its
			// message_delta the total of 71: the delta's count wins.
			name: "Ollama stream", capture: "ollama/anthropic-stream", stream: true, req: storyRequest("dog", 16),
			want:  "\"Hello, Can you help me?",
			usage: llm.Usage{PromptTokens: 71, CompletionTokens: 16},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := replay(t, tt.capture)
			m := newModel(t, anthropic.Config{BaseURL: srv.URL})
			var (
				resp *llm.Response
				err  error
			)
			if tt.stream {
				var evs []llm.Event
				evs, err = collect(m.Stream(t.Context(), tt.req))
				resp = accumulate(evs)
			} else {
				resp, err = m.Generate(t.Context(), tt.req)
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.capture, err)
			}
			if resp.Message.Content != tt.want || resp.FinishReason != llm.FinishLength || resp.Usage != tt.usage {
				t.Errorf("%s: content %q finish %q usage %+v; want %q, length, %+v",
					tt.capture, resp.Message.Content, resp.FinishReason, resp.Usage, tt.want, tt.usage)
			}
			if resp.Message.Role != llm.RoleAssistant || len(resp.Message.ToolCalls) != 0 {
				t.Errorf("%s: role %q calls %v, want assistant and no calls", tt.capture, resp.Message.Role, resp.Message.ToolCalls)
			}
		})
	}
}

// TestWireNoMaxTokens replays Ollama's answer to a request without
// max_tokens: a 400 in Anthropic's error format.
func TestWireNoMaxTokens(t *testing.T) {
	srv := replay(t, "ollama/err-anthropic-no-max-tokens")
	m := newModel(t, anthropic.Config{BaseURL: srv.URL})
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			_, err = collect(m.Stream(t.Context(), storyRequest("cat", 24)))
		} else {
			_, err = m.Generate(t.Context(), storyRequest("cat", 24))
		}
		ae, ok := errors.AsType[*llm.APIError](err)
		if !ok || !errors.Is(err, llm.ErrBadRequest) || llm.IsTransient(err) {
			t.Fatalf("stream=%v: error %v, want a permanent *llm.APIError wrapping ErrBadRequest", stream, err)
		}
		want := llm.APIError{Backend: "anthropic", StatusCode: 400, Message: "max_tokens is required and must be positive", Err: llm.ErrBadRequest}
		if *ae != want {
			t.Errorf("stream=%v: error %+v, want %+v", stream, *ae, want)
		}
	}
}
