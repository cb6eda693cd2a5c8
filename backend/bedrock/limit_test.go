package bedrock_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

// TestEndlessAnswerCapped: an answer that never ends (a server that
// ignores maxTokens) is read no further than its cap: a Converse body
// beyond llm.BodyLimit, or a ConverseStream structured answer (held until
// the output tool's input ends) beyond llm.AnswerLimit. Both fail with an
// *llm.APIError wrapping llm.ErrTruncated, and the server sees the client
// go away. Before the caps both were read until the server gave up.
func TestEndlessAnswerCapped(t *testing.T) {
	const giveUp = 64 << 20
	req := backendtest.Request(backendtest.Structured)
	req.MaxTokens = 48
	for _, tt := range []struct {
		name        string
		stream      bool
		contentType string
		head, piece []byte
		limit       int64
	}{
		{"converse", false, "application/json",
			[]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"`), []byte(strings.Repeat("story ", 100)), llm.BodyLimit(48)},
		{"converse stream", true, "application/vnd.amazon.eventstream",
			append(messageStart(t), toolStart(t, 0, "t1", "answer")...), toolDelta(t, 0, strings.Repeat("story ", 10)), 8 * int64(llm.AnswerLimit(48))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			written := make(chan int64, 1) // the handler's one report
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var n int64
				defer func() { written <- n }()
				// Read the request, then answer at once: the answer
				// then comes while the client's transport may still be
				// checking the request's end, the race plainBodyClient
				// closes (before it, 8 runs in 200 failed under load).
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tt.contentType)
				rc := http.NewResponseController(w)
				for b := tt.head; n < giveUp; b = tt.piece {
					k, err := w.Write(b)
					n += int64(k)
					if err != nil || rc.Flush() != nil || r.Context().Err() != nil {
						return
					}
				}
			}))
			defer srv.Close()
			m := newModel(t, srv.URL)
			var err error
			if tt.stream {
				for _, e := range m.Stream(t.Context(), req) {
					if e != nil {
						err = e
					}
				}
			} else {
				_, err = m.Generate(t.Context(), req)
			}
			if _, ok := errors.AsType[*llm.APIError](err); !ok || !errors.Is(err, llm.ErrTruncated) || llm.IsTransient(err) {
				t.Fatalf("error = %v, want a non-transient *llm.APIError wrapping ErrTruncated", err)
			}
			if !strings.Contains(err.Error(), "size cap (max_tokens 48)") {
				t.Errorf("error %q does not name the size cap", err)
			}
			if n := <-written; n > 3*tt.limit+8<<20 {
				t.Errorf("server wrote %d bytes before the client went away, want near the cap %d", n, tt.limit)
			}
		})
	}
}

// TestRequestBodyReadOnly checks that the transport gets request bodies it
// can only Read and Close: the SDK's own body fails WriteTo with io.EOF
// once closed, which made the transport close connections under answers.
func TestRequestBodyReadOnly(t *testing.T) {
	var sawWriterTo atomic.Bool
	var bodies atomic.Int32
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			bodies.Add(1)
			if _, ok := r.Body.(io.WriterTo); ok {
				sawWriterTo.Store(true)
			}
			io.Copy(io.Discard, r.Body)
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: readCloser([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`)), Request: r}, nil
	})}
	m := newModelWith(t, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: hc, Model: "m"})
	resp, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain))
	if err != nil {
		t.Fatalf("Generate = %v", err)
	}
	if resp.Message.Content != "ok" {
		t.Errorf("answer = %q, want %q", resp.Message.Content, "ok")
	}
	if bodies.Load() != 1 || sawWriterTo.Load() {
		t.Errorf("%d request bodies, one an io.WriterTo: %v; want 1, none", bodies.Load(), sawWriterTo.Load())
	}
}
