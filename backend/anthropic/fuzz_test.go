package anthropic_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

// FuzzStreamEvents feeds arbitrary bytes to Stream as the SSE body of a 200
// answer, with no network. Stream must neither panic nor hang, and must end
// either with usage and done or with one *llm.APIError of a known class.
// mode picks the request: plain (0), forced structured output (1), forced
// output whose schema is wrapped (2), or structured output offered beside
// a tool (3). The output tool's call never comes back as a tool call.
func FuzzStreamEvents(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.sse"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, s := range seeds {
		f.Add(byte(0), readFile(f, s[len("testdata/"):]))
	}
	for _, name := range []string{"llamacpp/anthropic-stream", "ollama/anthropic-stream"} {
		f.Add(byte(0), readCapture(f, name).body)
	}
	f.Add(byte(1), readFile(f, "conformance", "structured.sse"))
	f.Add(byte(2), []byte("event: message_start\ndata: "+msgStart+"\n\n"+
		"data: "+`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"answer","input":{}}}`+"\n\n"+
		"data: "+`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"value\":[1]}"}}`+"\n\n"+
		"data: "+msgStop+"\n\n"))
	f.Add(byte(3), sse(f, msgStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"answer","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"n\":1}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t2","name":"lookup","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"id\":7}"}}`,
		`{"type":"content_block_stop","index":1}`, msgDelta("tool_use"), msgStop))
	f.Add(byte(0), []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add(byte(0), []byte("data: {\"type\":\"message_stop\"}\n\n"))

	classes := []error{llm.ErrRateLimited, llm.ErrOverloaded, llm.ErrServer, llm.ErrTimeout,
		llm.ErrConnection, llm.ErrContextLength, llm.ErrBadRequest, llm.ErrAuth}
	f.Fuzz(func(t *testing.T, mode byte, body []byte) {
		req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}}
		switch mode % 4 {
		case 1:
			req.Output = &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)}
		case 2:
			req.Output = &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"array"}`)}
		case 3:
			req.Output = &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)}
			req.Tools = []llm.ToolDef{{Name: "lookup"}}
		}
		m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: canned(200, sseHeader, body, nil)})
		var (
			evs    []llm.Event
			gotErr error
			order  backendtest.DoneOrder
		)
		for ev, err := range m.Stream(t.Context(), req) {
			if gotErr != nil {
				t.Fatalf("event %+v, error %v after the error %v", ev, err, gotErr)
			}
			if err != nil {
				gotErr = err
				continue
			}
			evs = append(evs, ev)
			order.Add(t, ev)
		}
		if gotErr != nil {
			ae, ok := errors.AsType[*llm.APIError](gotErr)
			if !ok || ae.Backend != "anthropic" {
				t.Fatalf("error %#v is not an anthropic *llm.APIError", gotErr)
			}
			known := false
			for _, c := range classes {
				known = known || errors.Is(gotErr, c)
			}
			if !known {
				t.Fatalf("error %v has no class", gotErr)
			}
			return
		}
		n := len(evs)
		if n < 2 || evs[n-2].Type != llm.EventUsage || evs[n-1].Type != llm.EventDone {
			t.Fatalf("stream ended without an error and without usage and done: %+v", evs)
		}
		resp := accumulate(evs)
		if req.Output != nil && len(resp.Message.ToolCalls) > 0 {
			for _, c := range resp.Message.ToolCalls {
				if c.Name == "answer" {
					t.Fatalf("structured output came back as a tool call: %+v", resp.Message.ToolCalls)
				}
			}
		}
	})
}
