package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

func envelope(errType, msg string) []byte {
	return []byte(`{"type":"error","error":{"type":"` + errType + `","message":"` + msg + `"},"request_id":"req_1"}`)
}

func TestErrorClasses(t *testing.T) {
	const key = "sk-ant-secret-key-42"
	tests := []struct {
		name   string
		status int
		header http.Header
		body   []byte
		want   llm.APIError
	}{
		{
			name: "529 overloaded", status: 529, body: envelope("overloaded_error", "Overloaded"),
			want: llm.APIError{StatusCode: 529, Message: "Overloaded", Err: llm.ErrOverloaded},
		},
		{
			name: "503 without a body", status: 503,
			want: llm.APIError{StatusCode: 503, Message: "Service Unavailable", Err: llm.ErrOverloaded},
		},
		{
			name: "429 with retry-after-ms", status: 429, header: http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}},
			body: envelope("rate_limit_error", "slow down"),
			want: llm.APIError{StatusCode: 429, Message: "slow down", RetryAfter: 1500 * time.Millisecond, Err: llm.ErrRateLimited},
		},
		{
			name: "prompt is too long", status: 400, body: envelope("invalid_request_error", "prompt is too long: 215031 tokens > 200000 maximum"),
			want: llm.APIError{StatusCode: 400, Message: "prompt is too long: 215031 tokens > 200000 maximum", Err: llm.ErrContextLength},
		},
		{
			name: "413 request too large", status: 413, body: envelope("request_too_large", "Request exceeds the maximum allowed number of bytes."),
			want: llm.APIError{StatusCode: 413, Message: "Request exceeds the maximum allowed number of bytes.", Err: llm.ErrContextLength},
		},
		{
			name: "llama.cpp context size", status: 400,
			body: []byte(`{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`),
			want: llm.APIError{StatusCode: 400, Message: "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it", Err: llm.ErrContextLength},
		},
		{
			name: "404 unknown model", status: 404, body: envelope("not_found_error", "model: claude-nope"),
			want: llm.APIError{StatusCode: 404, Message: "model: claude-nope", Err: llm.ErrBadRequest},
		},
		{
			name: "403 permission", status: 403, body: envelope("permission_error", "no access"),
			want: llm.APIError{StatusCode: 403, Message: "authentication failed: check ANTHROPIC_API_KEY: no access", Err: llm.ErrAuth},
		},
		{
			name: "401 echoing the key is redacted", status: 401, body: envelope("authentication_error", "invalid x-api-key "+key),
			want: llm.APIError{StatusCode: 401, Message: "authentication failed: check ANTHROPIC_API_KEY: invalid x-api-key [REDACTED]", Err: llm.ErrAuth},
		},
		{
			name: "408", status: 408, body: envelope("timeout_error", "timed out"),
			want: llm.APIError{StatusCode: 408, Message: "timed out", Err: llm.ErrTimeout},
		},
		{
			name: "504 from a proxy", status: 504, header: http.Header{"Content-Type": {"text/html"}}, body: []byte("<html>Gateway Timeout</html>"),
			want: llm.APIError{StatusCode: 504, Message: "<html>Gateway Timeout</html>", Err: llm.ErrTimeout},
		},
		{
			name: "502 from a proxy", status: 502, header: http.Header{"Content-Type": {"text/html"}}, body: []byte("<html>Bad Gateway</html>"),
			want: llm.APIError{StatusCode: 502, Message: "<html>Bad Gateway</html>", Err: llm.ErrConnection},
		},
		{
			name: "500 with a long HTML body", status: 500, header: http.Header{"Content-Type": {"text/html"}}, body: []byte(strings.Repeat("x", 300)),
			want: llm.APIError{StatusCode: 500, Message: strings.Repeat("x", 256) + "...", Err: llm.ErrServer},
		},
		{
			name: "402 billing", status: 402, body: envelope("billing_error", "credit balance too low"),
			want: llm.APIError{StatusCode: 402, Message: "credit balance too low", Err: llm.ErrBadRequest},
		},
		{
			name: "an error envelope under 200", status: 200, header: jsonHeader, body: envelope("overloaded_error", "Overloaded"),
			want: llm.APIError{Message: "Overloaded", Err: llm.ErrOverloaded},
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			if stream && tt.status == 200 {
				continue // a stream's errors come as events: see TestStreamErrorEvent
			}
			t.Run(tt.name+map[bool]string{true: "/stream"}[stream], func(t *testing.T) {
				header := tt.header
				if header == nil {
					header = jsonHeader
				}
				m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", APIKey: key, HTTPClient: canned(tt.status, header, tt.body, nil)})
				var err error
				if stream {
					_, err = collect(m.Stream(t.Context(), &llm.Request{Model: "m"}))
				} else {
					_, err = m.Generate(t.Context(), &llm.Request{Model: "m"})
				}
				want := tt.want
				want.Backend = "anthropic"
				ae, ok := errors.AsType[*llm.APIError](err)
				if !ok {
					t.Fatalf("error %v, want %+v", err, want)
				}
				if *ae != want {
					t.Errorf("error %+v, want %+v", *ae, want)
				}
				if strings.Contains(err.Error(), key) {
					t.Errorf("error %q holds the key", err)
				}
			})
		}
	}
}

// TestStreamErrorEvent checks an error event in the middle of a stream,
// as Anthropic sends when it is overloaded after the response began.
func TestStreamErrorEvent(t *testing.T) {
	body := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
		"event: error\ndata: " + `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
	m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, sseHeader, []byte(body), nil)})
	evs, err := collect(m.Stream(t.Context(), &llm.Request{Model: "m"}))
	want := llm.APIError{Backend: "anthropic", Message: "Overloaded", Err: llm.ErrOverloaded}
	if ae, ok := errors.AsType[*llm.APIError](err); !ok || *ae != want {
		t.Fatalf("Stream error %v, want %+v", err, want)
	}
	if got := accumulate(evs).Message.Content; got != "Hi" {
		t.Errorf("text before the error %q, want %q", got, "Hi")
	}
}

// errorBody is a response body whose reads fail after its content.
type errorBody struct {
	r   io.Reader
	err error
}

func (b *errorBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = b.err
	}
	return n, err
}

func (b *errorBody) Close() error { return nil }

func TestTransportErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name      string
		err       error  // of the round trip
		readErr   error  // of the body's reads, after body
		body      string // of a 200 answer
		stream    bool
		wantClass error
	}{
		{name: "connection refused", err: refused, wantClass: llm.ErrConnection},
		{name: "connection refused/stream", err: refused, stream: true, wantClass: llm.ErrConnection},
		{name: "transport deadline", err: context.DeadlineExceeded, wantClass: llm.ErrTimeout},
		{name: "body cut", body: `{"id":"m","type":"mess`, readErr: io.ErrUnexpectedEOF, wantClass: llm.ErrConnection},
		{name: "body reset/stream", body: "event: message_start\n", readErr: syscall.ECONNRESET, stream: true, wantClass: llm.ErrConnection},
		{name: "stream ends without message_stop", body: "event: ping\ndata: {\"type\":\"ping\"}\n\n", stream: true, wantClass: llm.ErrConnection},
		{name: "stream line over 32 MiB", body: "data: " + strings.Repeat("x", 33<<20), stream: true, wantClass: llm.ErrServer},
		{name: "empty body", body: "", wantClass: llm.ErrServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if tt.err != nil {
					return nil, tt.err
				}
				var body io.ReadCloser = io.NopCloser(strings.NewReader(tt.body))
				if tt.readErr != nil {
					body = &errorBody{r: strings.NewReader(tt.body), err: tt.readErr}
				}
				h := jsonHeader
				if tt.stream {
					h = sseHeader
				}
				return &http.Response{StatusCode: 200, Header: h.Clone(), Body: body, Request: r}, nil
			})}
			m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: client})
			var err error
			if tt.stream {
				_, err = collect(m.Stream(t.Context(), &llm.Request{Model: "m"}))
			} else {
				_, err = m.Generate(t.Context(), &llm.Request{Model: "m"})
			}
			ae, ok := errors.AsType[*llm.APIError](err)
			if !ok || !errors.Is(err, tt.wantClass) || ae.Backend != "anthropic" {
				t.Errorf("error %v, want an anthropic *llm.APIError wrapping %v", err, tt.wantClass)
			}
		})
	}
}

// TestContextDone checks that a call under a done context returns the
// context's error, not an APIError.
func TestContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, jsonHeader, nil, nil)})
	if _, err := m.Generate(ctx, &llm.Request{Model: "m"}); !errors.Is(err, context.Canceled) || errors.As(err, new(*llm.APIError)) {
		t.Errorf("Generate = %v, want context.Canceled", err)
	}
	if _, err := collect(m.Stream(ctx, &llm.Request{Model: "m"})); !errors.Is(err, context.Canceled) || errors.As(err, new(*llm.APIError)) {
		t.Errorf("Stream = %v, want context.Canceled", err)
	}
}
