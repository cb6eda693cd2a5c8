package anthropic_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
)

// sse renders events as a Messages stream, each event named by its type.
func sse(t testing.TB, events ...string) []byte {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		var head struct{ Type string }
		if err := json.Unmarshal([]byte(e), &head); err != nil {
			t.Fatalf("event %s: %v", e, err)
		}
		b.WriteString("event: " + head.Type + "\ndata: " + e + "\n\n")
	}
	return []byte(b.String())
}

const (
	msgStart  = `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`
	msgStop   = `{"type":"message_stop"}`
	textStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
)

func msgDelta(stop string) string {
	return `{"type":"message_delta","delta":{"stop_reason":"` + stop + `"},"usage":{"output_tokens":7}}`
}

// TestAnswers checks answers Generate and Stream must read alike: each
// case has a JSON answer and the same answer streamed.
func TestAnswers(t *testing.T) {
	list := &llm.OutputSpec{Name: "list", Schema: json.RawMessage(`{"type":"array","items":{"type":"integer"}}`)}
	obj := &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object"}`)}
	tests := []struct {
		name   string
		output *llm.OutputSpec
		json   string // the content and stop_reason of the plain answer
		events []string
		want   llm.Response
	}{
		{
			name:   "wrapped structured answer",
			output: list,
			json:   `"content":[{"type":"tool_use","id":"t1","name":"list","input":{"value": [1, 2]}}],"stop_reason":"tool_use"`,
			events: []string{msgStart,
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"list","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"value\": [1,"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" 2]}"}}`,
				`{"type":"content_block_stop","index":0}`, msgDelta("tool_use"), msgStop},
			want: llm.Response{Message: llm.Message{Content: "[1,2]"}, FinishReason: llm.FinishStop},
		},
		{
			name:   "structured answer in the start event",
			output: obj,
			json:   `"content":[{"type":"tool_use","id":"t1","name":"output","input":{"a": {"b": "c d"}}}],"stop_reason":"tool_use"`,
			events: []string{msgStart,
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"output","input":{"a": {"b": "c d"}}}}`,
				`{"type":"content_block_stop","index":0}`, msgDelta("tool_use"), msgStop},
			want: llm.Response{Message: llm.Message{Content: `{"a":{"b":"c d"}}`}, FinishReason: llm.FinishStop},
		},
		{
			name:   "structured answer cut by max_tokens",
			output: obj,
			json:   `"content":[{"type":"text","text":"Sure."},{"type":"tool_use","id":"t1","name":"output","input":{}}],"stop_reason":"max_tokens"`,
			events: []string{msgStart, textStart,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sure."}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"output","input":{}}}`,
				msgDelta("max_tokens"), msgStop},
			want: llm.Response{Message: llm.Message{Content: `{}`}, FinishReason: llm.FinishLength},
		},
		{
			// A server that ignores tool_choice answers in text.
			name:   "forced answer given as text",
			output: obj,
			json:   `"content":[{"type":"text","text":"{\"a\": 1}"}],"stop_reason":"end_turn"`,
			events: []string{msgStart, textStart,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"a\":"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" 1}"}}`,
				msgDelta("end_turn"), msgStop},
			want: llm.Response{Message: llm.Message{Content: `{"a": 1}`}, FinishReason: llm.FinishStop},
		},
		{
			name: "tool calls without deltas",
			json: `"content":[{"type":"tool_use","id":"t1","name":"now","input":{}},{"type":"tool_use","id":"t2","name":"get","input":{"k":"v"}}],"stop_reason":"tool_use"`,
			events: []string{msgStart,
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"now","input":{}}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t2","name":"get","input":{"k":"v"}}}`,
				`{"type":"content_block_stop","index":1}`,
				msgDelta("tool_use"), msgStop},
			want: llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{
				{ID: "t1", Name: "now", Arguments: json.RawMessage(`{}`)},
				{ID: "t2", Name: "get", Arguments: json.RawMessage(`{"k":"v"}`)},
			}}, FinishReason: llm.FinishToolCalls},
		},
		{
			name: "thinking and unknown blocks are skipped",
			json: `"content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Hi."}],"stop_reason":"stop_sequence"`,
			events: []string{msgStart,
				`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"not text"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi."}}`,
				`{"type":"content_block_delta","index":9,"delta":{"type":"text_delta","text":"no such block"}}`,
				`{"type":"some_future_event","index":1}`,
				msgDelta("stop_sequence"), msgStop},
			want: llm.Response{Message: llm.Message{Content: "Hi."}, FinishReason: llm.FinishStop},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Output: tt.output}
			want := tt.want
			want.Message.Role = llm.RoleAssistant
			want.Usage = llm.Usage{PromptTokens: 10, CompletionTokens: 7}

			body := `{"id":"m","type":"message","role":"assistant",` + tt.json + `,"usage":{"input_tokens":10,"output_tokens":7}}`
			m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, jsonHeader, []byte(body), nil)})
			got, err := m.Generate(t.Context(), req)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("Generate (-want +got):\n%s", diff)
			}

			m = newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, sseHeader, sse(t, tt.events...), nil)})
			evs, err := collect(m.Stream(t.Context(), req))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(&want, accumulate(evs)); diff != "" {
				t.Errorf("Stream (-want +got):\n%s", diff)
			}
			if n := len(evs); n < 2 || evs[n-1].Type != llm.EventDone || evs[n-2].Type != llm.EventUsage {
				t.Errorf("Stream events %+v, want usage then done last", evs)
			}
		})
	}
}

// TestStreamBreak checks that breaking out of a stream closes the body.
func TestStreamBreak(t *testing.T) {
	body := &closeBody{r: strings.NewReader(string(readFile(t, "conformance", "plain.sse")))}
	client := canned(200, sseHeader, nil, nil)
	client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: sseHeader.Clone(), Body: body, Request: r}, nil
	})
	m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: client})
	for ev, err := range m.Stream(t.Context(), &llm.Request{Model: "m"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == llm.EventText {
			break
		}
	}
	if !body.closed {
		t.Error("body not closed after breaking out of the stream")
	}
}

type closeBody struct {
	r      *strings.Reader
	closed bool
}

func (b *closeBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *closeBody) Close() error               { b.closed = true; return nil }
