package anthropic_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

// endlessBody is a response body that starts with head and then repeats
// piece without end, counting the bytes read; after max bytes it fails, so
// that a client that reads on fails instead of hanging.
type endlessBody struct {
	head, piece string
	read, max   int64
	pending     string
	closed      bool
}

func (b *endlessBody) Read(p []byte) (int, error) {
	if b.read >= b.max {
		return 0, errors.New("endless body: the client read everything the test allows")
	}
	if b.pending == "" {
		if b.read == 0 {
			b.pending = b.head
		} else {
			b.pending = b.piece
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	b.read += int64(n)
	return n, nil
}

func (b *endlessBody) Close() error { b.closed = true; return nil }

func endlessClient(header http.Header, body *endlessBody) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: header.Clone(), Body: body, Request: r}, nil
	})}
}

// TestEndlessAnswerCapped: an answer that never ends (a server that
// ignores max_tokens) is read no further than its cap, plain or streamed
// as structured output (which the backend holds until the tool input
// ends), and fails with an *llm.APIError wrapping llm.ErrTruncated. Before
// the caps both read on until the body gave out.
func TestEndlessAnswerCapped(t *testing.T) {
	const giveUp = 64 << 20
	obj := &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object"}`)}
	delta := `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"story story story "}}`
	for _, tt := range []struct {
		name   string
		stream bool
		body   *endlessBody
		limit  int64
	}{
		{"plain", false, &endlessBody{head: `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"`, piece: "story story story ", max: giveUp}, llm.BodyLimit(48)},
		{"streamed structured output", true, &endlessBody{
			head: string(sse(t, msgStart, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"output","input":{}}}`)),
			// About four times the JSON fragment it carries.
			piece: string(sse(t, delta)), max: giveUp,
		}, 8 * int64(llm.AnswerLimit(48))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			header := jsonHeader
			if tt.stream {
				header = sseHeader
			}
			m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: endlessClient(header, tt.body)})
			req := &llm.Request{Model: "m", MaxTokens: 48, Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Output: obj}
			var err error
			if tt.stream {
				_, err = collect(m.Stream(t.Context(), req))
			} else {
				_, err = m.Generate(t.Context(), req)
			}
			if _, ok := errors.AsType[*llm.APIError](err); !ok || !errors.Is(err, llm.ErrTruncated) || llm.IsTransient(err) {
				t.Fatalf("error = %v, want a non-transient *llm.APIError wrapping ErrTruncated", err)
			}
			if !strings.Contains(err.Error(), "size cap (max_tokens 48)") {
				t.Errorf("error %q does not name the size cap", err)
			}
			if tt.body.read > tt.limit+64<<10 || !tt.body.closed {
				t.Errorf("read %d bytes (closed %v), want at most about %d and the body closed", tt.body.read, tt.body.closed, tt.limit)
			}
		})
	}
}
