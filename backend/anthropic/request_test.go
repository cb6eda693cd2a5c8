package anthropic_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// sentBody returns the body Generate sends for req, answered with the plain
// fixture.
func sentBody(t *testing.T, cfg anthropic.Config, req *llm.Request) []byte {
	t.Helper()
	var sent []byte
	cfg.BaseURL = "http://anthropic.test"
	cfg.HTTPClient = canned(200, jsonHeader, readFile(t, "conformance", "plain.json"), &sent)
	m := newModel(t, cfg)
	if _, err := m.Generate(t.Context(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return sent
}

// TestRequestGolden pins the exact JSON of a request with tools, a tool
// call and its result.
func TestRequestGolden(t *testing.T) {
	got := sentBody(t, anthropic.Config{APIKey: backendtest.APIKey}, backendtest.Request(backendtest.ToolResult))
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, got)
	}
	buf.WriteByte('\n')
	golden := filepath.Join("testdata", "request.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readFile(t, "request.golden")
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("request body:\n%s\nwant (testdata/request.golden; go test -update rewrites it):\n%s", buf.Bytes(), want)
	}
}

// TestRequestPrefixStable checks that the shared prefix is byte-identical
// from call to call, schema keywords and all: Anthropic's prompt cache
// matches bytes.
func TestRequestPrefixStable(t *testing.T) {
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "hi"}},
		Tools: []llm.ToolDef{{Name: "grep", Parameters: json.RawMessage(`{"type":"object","properties":{"p":{"type":"string"},"max":{"type":"integer","minimum":1}},` +
			`"required":["p"],"additionalProperties":false,"$defs":{"x":{"type":"string"}},"description":"d","title":"t","examples":[{"p":"a"}]}`)}},
	}
	first := sentBody(t, anthropic.Config{}, req)
	for i := range 20 {
		if got := sentBody(t, anthropic.Config{}, req); !bytes.Equal(got, first) {
			t.Fatalf("call %d sent\n%s\nfirst call sent\n%s", i+2, got, first)
		}
	}
}

func TestRequestMapping(t *testing.T) {
	sys := llm.Message{Role: llm.RoleSystem, Content: "sys"}
	user := llm.Message{Role: llm.RoleUser, Content: "task"}
	tool := llm.ToolDef{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}
	call := func(id string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "t", Arguments: json.RawMessage(`{"a":1}`)}
	}
	tests := []struct {
		name string
		cfg  anthropic.Config
		req  *llm.Request
		want string // the JSON of the request body
	}{
		{
			name: "defaults from Config",
			cfg:  anthropic.Config{Model: "claude-x", MaxTokens: 100},
			req:  &llm.Request{Messages: []llm.Message{user}},
			want: `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
		{
			name: "default max tokens, request model and temperature",
			req:  &llm.Request{Model: "m", Temperature: new(0.5), Messages: []llm.Message{user}},
			want: `{"model":"m","max_tokens":4096,"temperature":0.5,"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
		{
			name: "system messages: the last block marked",
			req:  &llm.Request{Model: "m", MaxTokens: 1, Messages: []llm.Message{sys, {Role: llm.RoleSystem, Content: "more"}, user}},
			want: `{"model":"m","max_tokens":1,
				"system":[{"type":"text","text":"sys"},{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}],
				"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
		{
			name: "tool results merge into one user turn, with what follows",
			req: &llm.Request{Model: "m", MaxTokens: 1, Tools: []llm.ToolDef{tool}, Messages: []llm.Message{
				user,
				{Role: llm.RoleAssistant, Content: "Looking.", ToolCalls: []llm.ToolCall{call("c1"), call("c2")}},
				{Role: llm.RoleTool, ToolCallID: "c1", Name: "t", Content: "one"},
				{Role: llm.RoleTool, ToolCallID: "c2", Name: "t", Content: "no such file", IsError: true},
				{Role: llm.RoleUser, Content: "Go on."},
			}},
			want: `{"model":"m","max_tokens":1,
				"tools":[{"name":"t","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
				"messages":[
					{"role":"user","content":[{"type":"text","text":"task"}]},
					{"role":"assistant","content":[{"type":"text","text":"Looking."},
						{"type":"tool_use","id":"c1","name":"t","input":{"a":1}},{"type":"tool_use","id":"c2","name":"t","input":{"a":1}}]},
					{"role":"user","content":[
						{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"one"}]},
						{"type":"tool_result","tool_use_id":"c2","is_error":true,"content":[{"type":"text","text":"no such file"}]},
						{"type":"text","text":"Go on."}]}]}`,
		},
		{
			name: "malformed arguments and an empty result",
			req: &llm.Request{Model: "m", MaxTokens: 1, Messages: []llm.Message{
				user,
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "t", Arguments: json.RawMessage(`{"a":`)}}},
				{Role: llm.RoleTool, ToolCallID: "c1", Name: "t"},
			}},
			want: `{"model":"m","max_tokens":1,"messages":[
				{"role":"user","content":[{"type":"text","text":"task"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"t","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1"}]}]}`,
		},
		{
			name: "output with tools: offered after them, the model must call one",
			req: &llm.Request{Model: "m", MaxTokens: 1, Tools: []llm.ToolDef{{Name: "t", Description: "Does t."}}, Messages: []llm.Message{user},
				Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object"}`)}},
			want: `{"model":"m","max_tokens":1,
				"tools":[{"name":"t","description":"Does t.","input_schema":{"type":"object"}},
					{"name":"output","description":"Give the final answer, once no other tool is needed. Its input is the answer.",
					"input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"any"},
				"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
		{
			name: "output named like a tool of the request: the first free name_N",
			req: &llm.Request{Model: "m", MaxTokens: 1, Messages: []llm.Message{user},
				Tools:  []llm.ToolDef{{Name: "output"}, {Name: "output_2"}},
				Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"string"}`)}},
			want: `{"model":"m","max_tokens":1,
				"tools":[{"name":"output","input_schema":{"type":"object"}},{"name":"output_2","input_schema":{"type":"object"}},
					{"name":"output_3","description":"Give the final answer, once no other tool is needed. Its input is the answer.",
					"input_schema":{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]},"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"any"},
				"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
		{
			name: "output forced under the default name",
			req:  &llm.Request{Model: "m", MaxTokens: 1, Messages: []llm.Message{user}, Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)}},
			want: `{"model":"m","max_tokens":1,
				"tools":[{"name":"output","description":"Give the final answer. Its input is the answer.",
					"input_schema":{"type":"object","properties":{"a":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"tool","name":"output"},
				"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
		{
			name: "an output schema that is not an object is wrapped",
			req:  &llm.Request{Model: "m", MaxTokens: 1, Messages: []llm.Message{user}, Output: &llm.OutputSpec{Name: "list", Schema: json.RawMessage(`{"type":"array","items":{"type":"integer"}}`)}},
			want: `{"model":"m","max_tokens":1,
				"tools":[{"name":"list","description":"Give the final answer. Its input is the answer.",
					"input_schema":{"type":"object","properties":{"value":{"type":"array","items":{"type":"integer"}}},"required":["value"]},
					"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"tool","name":"list"},
				"messages":[{"role":"user","content":[{"type":"text","text":"task"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sentBody(t, tt.cfg, tt.req)
			if diff := jsonDiff(t, []byte(tt.want), got); diff != "" {
				t.Errorf("request body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestInvalidSchema(t *testing.T) {
	tests := []struct {
		name string
		req  *llm.Request
	}{
		{name: "tool schema not an object", req: &llm.Request{Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`[1]`)}}}},
		{name: "tool schema not JSON", req: &llm.Request{Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{`)}}}},
		{name: "output schema not JSON", req: &llm.Request{Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			client := canned(200, jsonHeader, nil, nil)
			inner := client.Transport
			client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) { calls++; return inner.RoundTrip(r) })
			m := newModel(t, anthropic.Config{BaseURL: "http://anthropic.test", HTTPClient: client})
			_, err := m.Generate(t.Context(), tt.req)
			if !errors.Is(err, llm.ErrBadRequest) {
				t.Errorf("Generate = %v, want ErrBadRequest", err)
			}
			_, err = collect(m.Stream(t.Context(), tt.req))
			if !errors.Is(err, llm.ErrBadRequest) {
				t.Errorf("Stream = %v, want ErrBadRequest", err)
			}
			if calls != 0 {
				t.Errorf("%d HTTP requests, want none", calls)
			}
		})
	}
}
