package openai_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		class     error
		msg       string // in the message
		retryWait time.Duration
	}{
		{name: "429 retry-after-ms", status: 429, header: map[string]string{"retry-after-ms": "1500"},
			body: `{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}`, class: llm.ErrRateLimited, msg: "Rate limit reached", retryWait: 1500 * time.Millisecond},
		{name: "429 insufficient quota is permanent", status: 429,
			body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, class: llm.ErrBadRequest, msg: "quota"},
		{name: "529 overloaded", status: 529, body: `{"error":{"message":"Overloaded","type":"overloaded_error"}}`, class: llm.ErrOverloaded, msg: "Overloaded"},
		{name: "503 with Retry-After", status: 503, header: map[string]string{"Retry-After": "7"}, body: `{"error":{"message":"busy"}}`, class: llm.ErrOverloaded, retryWait: 7 * time.Second},
		{name: "504 gateway timeout", status: 504, body: "upstream timed out", class: llm.ErrTimeout, msg: "upstream timed out"},
		{name: "408", status: 408, body: "", class: llm.ErrTimeout, msg: "Request Timeout"},
		{name: "502 HTML", status: 502, body: "<html>\n<head><title>502 Bad Gateway</title></head>\n</html>", class: llm.ErrConnection, msg: "<html>"},
		{name: "403", status: 403, body: `{"error":{"message":"Project does not have access to model"}}`, class: llm.ErrAuth, msg: "authentication failed: check OPENAI_API_KEY: Project does not have access"},
		{name: "404 text", status: 404, body: "404 page not found\n", class: llm.ErrBadRequest, msg: "404 page not found"},
		{name: "vLLM context error", status: 400,
			body:  `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","type":"BadRequestError","param":null,"code":400}`,
			class: llm.ErrContextLength, msg: "maximum context length is 4096"},
		{name: "vLLM wrapped error", status: 400,
			body:  `{"error":{"message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096.","type":"BadRequestError","param":null,"code":400}}`,
			class: llm.ErrContextLength, msg: "maximum model length"},
		{name: "SGLang context error", status: 400,
			body:  `{"object":"error","message":"The input (5000 tokens) is longer than the model's context length (4096 tokens).","type":"BadRequestError","param":null,"code":400}`,
			class: llm.ErrContextLength, msg: "longer than the model's context length"},
		{name: "vLLM bad request", status: 400, body: `{"object":"error","message":"[{'type': 'missing', 'loc': ('body', 'messages')}]","type":"BadRequestError","param":null,"code":400}`, class: llm.ErrBadRequest, msg: "missing"},
		{name: "FastAPI detail", status: 422, body: `{"detail":[{"loc":["body","messages"],"msg":"Field required","type":"missing"}]}`, class: llm.ErrBadRequest, msg: "Field required"},
		{name: "string error", status: 400, body: `{"error":"Input validation error: temperature must be positive","error_type":"validation"}`, class: llm.ErrBadRequest, msg: "temperature must be positive"},
		{name: "llama.cpp type error 500", status: 500, body: `{"error":{"code":500,"message":"[json.exception.type_error.302] type must be string, but is number","type":"server_error"}}`, class: llm.ErrBadRequest, msg: "type_error"},
		{name: "plain 500", status: 500, body: `{"error":{"code":500,"message":"CUDA error: out of memory","type":"server_error"}}`, class: llm.ErrServer, msg: "out of memory"},
		{name: "key echoed back is redacted", status: 401, body: `{"error":{"message":"Invalid key ` + backendtest.APIKey + `"}}`, class: llm.ErrAuth, msg: "Invalid key [REDACTED]"},
		{name: "request id kept", status: 500, header: map[string]string{"x-request-id": "req_123"}, body: `{"error":{"message":"oops"}}`, class: llm.ErrServer, msg: "oops (request req_123)"},
		{name: "empty body", status: 500, class: llm.ErrServer, msg: "Internal Server Error"},
		{name: "long message truncated", status: 400, body: `{"error":{"message":"` + strings.Repeat("é", 3000) + `"}}`, class: llm.ErrBadRequest, msg: "éé…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", APIKey: backendtest.APIKey, Flavor: openai.FlavorVLLM})
			req := backendtest.Request(backendtest.Plain)
			_, gerr := m.Generate(t.Context(), req)
			_, serr := collect(m.Stream(t.Context(), req))
			for via, err := range map[string]error{"Generate": gerr, "Stream": serr} {
				ae, ok := errors.AsType[*llm.APIError](err)
				if !ok || !errors.Is(err, tt.class) || ae.Backend != "vllm" || ae.StatusCode != tt.status {
					t.Fatalf("%s error = %#v, want a vllm APIError of class %v and status %d", via, err, tt.class, tt.status)
				}
				if !strings.Contains(ae.Message, tt.msg) || len(ae.Message) > 2100 {
					t.Errorf("%s message = %q, want it to contain %q (and stay short)", via, ae.Message, tt.msg)
				}
				if strings.Contains(err.Error(), backendtest.APIKey) {
					t.Errorf("%s error %q leaks the API key", via, err)
				}
				if ae.RetryAfter != tt.retryWait {
					t.Errorf("%s RetryAfter = %v, want %v", via, ae.RetryAfter, tt.retryWait)
				}
			}
		})
	}
}

func TestStreamErrorEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  string
		class error
		msg   string
	}{
		{"OpenAI-style error chunk", "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":429}}\n\n", llm.ErrRateLimited, "Rate limit reached"},
		{"vLLM error chunk", "data: {\"object\":\"error\",\"message\":\"maximum context length is 4096 tokens\",\"type\":\"BadRequestError\",\"code\":400}\n\n", llm.ErrContextLength, "maximum context length"},
		{"error without code", "data: {\"error\":{\"message\":\"engine died\"}}\n\n", llm.ErrServer, "engine died"},
		{"error event type", "event: error\ndata: {\"message\":\"worker crashed\"}\n\n", llm.ErrServer, "worker crashed"},
		{"error after text", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\":{\"message\":\"aborted\",\"code\":500}}\n\n", llm.ErrServer, "aborted"},
		{"clean end without [DONE]", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n", llm.ErrConnection, "before [DONE]"},
		{"array chunk", "data: [1,2]\n\n", llm.ErrServer, "malformed stream chunk"},
		{"not SSE at all", "<html>oops</html>", llm.ErrConnection, "before [DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := offlineModel(t, "text/event-stream", []byte(tt.body))
			events, err := collect(m.Stream(t.Context(), backendtest.Request(backendtest.Plain)))
			ae, ok := errors.AsType[*llm.APIError](err)
			if !ok || !errors.Is(err, tt.class) || !strings.Contains(ae.Message, tt.msg) {
				t.Errorf("Stream error = %#v after %d events, want class %v with %q", err, len(events), tt.class, tt.msg)
			}
		})
	}
}

func TestStreamOfWholeCompletion(t *testing.T) {
	t.Parallel()
	// A server that ignores "stream": true answers one JSON completion.
	m := offlineModel(t, "application/json", readFile(t, "conformance", "plain.json"))
	events, err := collect(m.Stream(t.Context(), backendtest.Request(backendtest.Plain)))
	if err != nil {
		t.Fatalf("Stream = %v", err)
	}
	got := accumulate(events)
	if got.Message.Content != backendtest.PlainText || got.Usage != backendtest.PlainUsage || got.FinishReason != llm.FinishStop {
		t.Errorf("Stream of a JSON answer = %+v, want %q, %+v, stop", got, backendtest.PlainText, backendtest.PlainUsage)
	}
}

func TestStreamToolCallsSharingIndex(t *testing.T) {
	t.Parallel()
	// Some servers number every streamed call 0; distinct IDs tell them
	// apart.
	body := `data: {"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"lookup","arguments":"{\"id\""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":7}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`
	m := offlineModel(t, "text/event-stream", []byte(body))
	events, err := collect(m.Stream(t.Context(), backendtest.Request(backendtest.ToolCall)))
	if err != nil {
		t.Fatalf("Stream = %v", err)
	}
	got := accumulate(events)
	want := []llm.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: []byte(`{"path":"a.go"}`)},
		{ID: "call_b", Name: "lookup", Arguments: []byte(`{"id":7}`)},
	}
	if len(got.Message.ToolCalls) != 2 || got.FinishReason != llm.FinishToolCalls {
		t.Fatalf("calls %+v finish %q, want %+v and tool_calls", got.Message.ToolCalls, got.FinishReason, want)
	}
	for i, c := range got.Message.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name || string(c.Arguments) != string(want[i].Arguments) {
			t.Errorf("call %d = %+v (args %s), want %+v (args %s)", i, c, c.Arguments, want[i], want[i].Arguments)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("x-ratelimit-limit-requests", "10000")
		h.Set("x-ratelimit-remaining-requests", "9999")
		h.Set("x-ratelimit-limit-tokens", "2000000")
		h.Set("x-ratelimit-remaining-tokens", "1999000")
		h.Set("x-ratelimit-reset-requests", "6ms")
		h.Set("x-ratelimit-reset-tokens", "1m30s")
		if body, _ := io.ReadAll(r.Body); bytes.Contains(body, []byte(`"stream":true`)) {
			h.Set("Content-Type", "text/event-stream")
			_, _ = w.Write(readFile(t, "conformance", "plain.sse"))
			return
		}
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(readFile(t, "conformance", "plain.json"))
	}))
	defer srv.Close()
	want := &llm.RateLimitInfo{LimitRequests: 10000, RemainingRequests: 9999, LimitTokens: 2000000, RemainingTokens: 1999000,
		ResetRequests: 6 * time.Millisecond, ResetTokens: 90 * time.Second}
	m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", Flavor: openai.FlavorOpenAI})
	resp, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain))
	if err != nil || resp.RateLimit == nil || *resp.RateLimit != *want {
		t.Errorf("Generate RateLimit = %+v, %v; want %+v", resp.RateLimit, err, want)
	}
	events, err := collect(m.Stream(t.Context(), backendtest.Request(backendtest.Plain)))
	if err != nil || len(events) == 0 || events[0].Type != llm.EventRateLimit || *events[0].RateLimit != *want {
		t.Errorf("first stream event = %+v, %v; want EventRateLimit %+v", events, err, want)
	}
	if got := accumulate(events); got.Message.Content != backendtest.PlainText {
		t.Errorf("stream content = %q, want %q", got.Message.Content, backendtest.PlainText)
	}
}

func TestNoRateLimitHeaders(t *testing.T) {
	t.Parallel()
	m := offlineModel(t, "application/json", readFile(t, "conformance", "plain.json"))
	resp, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain))
	if err != nil || resp.RateLimit != nil {
		t.Errorf("Generate RateLimit = %+v, %v; want nil", resp.RateLimit, err)
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		m := newModel(t, openai.Config{BaseURL: url + "/v1", APIKey: backendtest.APIKey})
		_, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain))
		if !errors.Is(err, llm.ErrConnection) || !llm.IsTransient(err) || strings.Contains(err.Error(), backendtest.APIKey) {
			t.Errorf("Generate = %v, want a transient ErrConnection", err)
		}
	})
	t.Run("header timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client hang up
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 20 * time.Millisecond}}
		defer client.CloseIdleConnections()
		m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", HTTPClient: client})
		_, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain))
		if !errors.Is(err, llm.ErrTimeout) || !llm.IsTransient(err) {
			t.Errorf("Generate = %v, want a transient ErrTimeout", err)
		}
	})
	for _, tt := range []struct {
		name string
		want error
		ctx  func(context.Context) (context.Context, context.CancelFunc)
	}{
		{"cancelled", context.Canceled, context.WithCancel},
		{"deadline", context.DeadlineExceeded, func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 20*time.Millisecond)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			arrived := make(chan struct{}, 2) // one per call
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client hang up
				arrived <- struct{}{}
				<-r.Context().Done()
			}))
			defer srv.Close()
			m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1"})
			for _, via := range []string{"Generate", "Stream"} {
				ctx, cancel := tt.ctx(t.Context())
				if tt.want == context.Canceled {
					go func() {
						select {
						case <-arrived:
							cancel()
						case <-ctx.Done():
						}
					}()
				}
				var err error
				if via == "Generate" {
					_, err = m.Generate(ctx, backendtest.Request(backendtest.Plain))
				} else {
					_, err = collect(m.Stream(ctx, backendtest.Request(backendtest.Plain)))
				}
				cancel()
				if !errors.Is(err, tt.want) || llm.IsTransient(err) {
					t.Errorf("%s = %v, want an error wrapping %v", via, err, tt.want)
				}
			}
		})
	}
}

func TestStreamBreakClosesBody(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client hang up
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(readFile(t, "conformance", "cancel.sse"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client hung up
		close(closed)
	}))
	defer srv.Close()
	m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1"})
	for ev, err := range m.Stream(t.Context(), backendtest.Request(backendtest.Plain)) {
		if err != nil || ev.Type != llm.EventText {
			t.Fatalf("first event = %+v, %v; want text", ev, err)
		}
		break
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still holds the connection 5s after the consumer broke out of the loop")
	}
}
