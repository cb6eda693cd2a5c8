package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// This file tests structured output for agents with tools: the output tool
// offered beside the job's tools with tool_choice any, run through the
// agent loop against a server speaking the Messages API.

// answerSchema is the output schema of the agents of this file.
const answerSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// lookupDef is the job's tool: it answers "seven".
var lookupDef = llm.ToolDef{Name: "lookup", Description: "Look up an id.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)}

// script is a server speaking the Messages API that answers its i-th
// request with turns[i]: a JSON message, or an SSE stream when the request
// asks for one. It keeps the bodies of the requests.
type script struct {
	srv   *httptest.Server
	turns []turn

	mu     sync.Mutex // protects bodies
	bodies [][]byte
}

// turn is one answer: its content blocks, as a message's JSON has them, and
// its stop_reason.
type turn struct {
	stop   string
	blocks []string
}

func textBlock(text string) string {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	return string(b)
}

func toolUse(id, name, input string) string {
	return `{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}`
}

func newScript(t *testing.T, turns ...turn) *script {
	t.Helper()
	s := &script{turns: turns}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request: %v", err)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		i := len(s.bodies) - 1
		s.mu.Unlock()
		if i >= len(s.turns) {
			t.Errorf("request %d, want %d at most", i+1, len(s.turns))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"no more turns"}}`)
			return
		}
		var req struct{ Stream bool }
		_ = json.Unmarshal(body, &req)
		tn := s.turns[i]
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"m","content":[%s],"stop_reason":%q,"usage":{"input_tokens":10,"output_tokens":7}}`,
				i, strings.Join(tn.blocks, ","), tn.stop)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(sse(t, streamEvents(t, tn)...))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// streamEvents renders a turn as the events of a Messages stream: text in
// two deltas, a tool's input in two input_json_delta pieces.
func streamEvents(t *testing.T, tn turn) []string {
	evs := []string{msgStart}
	for i, raw := range tn.blocks {
		var b struct {
			Type, Text, ID, Name string
			Input                json.RawMessage
		}
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Errorf("block %s: %v", raw, err)
			continue
		}
		idx := fmt.Sprint(i)
		delta := func(kind, key, piece string) string {
			v, _ := json.Marshal(piece)
			return `{"type":"content_block_delta","index":` + idx + `,"delta":{"type":"` + kind + `","` + key + `":` + string(v) + `}}`
		}
		switch b.Type {
		case "text":
			half := len(b.Text) / 2
			evs = append(evs, `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`,
				delta("text_delta", "text", b.Text[:half]), delta("text_delta", "text", b.Text[half:]))
		case "tool_use":
			in := string(b.Input)
			half := len(in) / 2
			evs = append(evs, `{"type":"content_block_start","index":`+idx+`,"content_block":`+toolUse(b.ID, b.Name, "{}")+`}`,
				delta("input_json_delta", "partial_json", in[:half]), delta("input_json_delta", "partial_json", in[half:]))
		}
		evs = append(evs, `{"type":"content_block_stop","index":`+idx+`}`)
	}
	return append(evs, msgDelta(tn.stop), msgStop)
}

// requests returns the bodies of the requests received so far.
func (s *script) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies
}

// sentRequest is what these tests read of a request body.
type sentRequest struct {
	Stream bool `json:"stream"`
	Tools  []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Messages   []struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"content"`
	} `json:"messages"`
}

func decodeSent(t *testing.T, body []byte) sentRequest {
	t.Helper()
	var r sentRequest
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, body)
	}
	return r
}

// conversation renders the messages of r, a block a line.
func (r sentRequest) conversation() []string {
	var out []string
	for _, m := range r.Messages {
		for _, b := range m.Content {
			line := m.Role + " " + b.Type + ":"
			switch b.Type {
			case "text":
				line += b.Text
			case "tool_use":
				line += b.ID + ":" + b.Name + ":" + string(b.Input)
			case "tool_result":
				line += b.ToolUseID
				for _, c := range b.Content {
					line += ":" + c.Text
				}
			}
			out = append(out, line)
		}
	}
	return out
}

// checkPairing reports what the Messages API refuses about tool use in r:
// a tool_use block without a tool_result in the next turn, or a
// tool_result that answers no tool_use of the turn before.
func checkPairing(t *testing.T, r sentRequest) {
	t.Helper()
	for i, m := range r.Messages {
		if m.Role != "assistant" {
			continue
		}
		uses := map[string]bool{}
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				uses[b.ID] = true
			}
		}
		results := map[string]bool{}
		if i+1 < len(r.Messages) {
			for _, b := range r.Messages[i+1].Content {
				if b.Type == "tool_result" {
					results[b.ToolUseID] = true
				}
			}
		}
		if diff := cmp.Diff(uses, results); diff != "" {
			t.Errorf("message %d: tool_use ids (-) and the tool_result ids after them (+) differ:\n%s", i, diff)
		}
	}
}

// generateOnly hides the Stream method of a Model, so that the agent
// calls Generate.
type generateOnly struct{ m llm.Model }

func (g generateOnly) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return g.m.Generate(ctx, req)
}

// modes are the two ways an agent calls the backend.
var modes = []struct {
	name string
	wrap func(*anthropic.Model) llm.Model
}{
	{"generate", func(m *anthropic.Model) llm.Model { return generateOnly{m} }},
	{"stream", func(m *anthropic.Model) llm.Model { return m }},
}

// calls records the arguments of a tool's calls.
type calls struct {
	mu   sync.Mutex // protects args
	args []string
}

func (c *calls) tool(def llm.ToolDef, result string) tool.Tool {
	return tool.Func(tool.Spec{Name: def.Name, Description: def.Description, Parameters: def.Parameters},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.args = append(c.args, string(args))
			return result, nil
		})
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.args
}

// runAgent runs one agent with answerSchema and tools on m until it ends.
func runAgent(t *testing.T, m llm.Model, tools ...tool.Tool) (*agent.State, error) {
	t.Helper()
	sch, err := schema.Compile(json.RawMessage(answerSchema))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tool.NewPool(tools, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := agent.New(agent.Config{Model: m, ModelName: "m", System: "Answer with a number.", Tools: pool, Schema: sch, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is id 7?"}}}
	return st, r.Run(t.Context(), st)
}

// checkOffered checks that every request offers tools (by name), the last
// being the output tool with answerSchema, with tool_choice any, streamed
// or not as mode says.
func checkOffered(t *testing.T, reqs []sentRequest, stream bool, tools ...string) {
	t.Helper()
	for i, r := range reqs {
		var names []string
		for _, tl := range r.Tools {
			names = append(names, tl.Name)
		}
		if diff := cmp.Diff(tools, names); diff != "" {
			t.Errorf("request %d: tools (-want +got):\n%s", i+1, diff)
		}
		if n := len(r.Tools); n > 0 {
			if diff := jsonDiff(t, []byte(answerSchema), r.Tools[n-1].InputSchema); diff != "" {
				t.Errorf("request %d: output tool's input_schema (-want +got):\n%s", i+1, diff)
			}
		}
		if got := compactJSON(r.ToolChoice); got != `{"type":"any"}` {
			t.Errorf("request %d: tool_choice = %s, want {\"type\":\"any\"}", i+1, got)
		}
		if r.Stream != stream {
			t.Errorf("request %d: stream = %v, want %v", i+1, r.Stream, stream)
		}
		checkPairing(t, r)
	}
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAgentToolThenOutput runs a two-turn agent: it calls the job's tool,
// then answers through the output tool. Each request offers both tools
// with tool_choice any, and the agent's output is the output tool's input.
func TestAgentToolThenOutput(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			s := newScript(t,
				turn{"tool_use", []string{toolUse("toolu_1", "lookup", `{"id": 7}`)}},
				turn{"tool_use", []string{toolUse("toolu_2", "output", `{"n": 7}`)}},
			)
			var lookups calls
			m := newModel(t, anthropic.Config{BaseURL: s.srv.URL})
			st, err := runAgent(t, mode.wrap(m), lookups.tool(lookupDef, "seven"))
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if got := string(st.Output); got != `{"n":7}` {
				t.Errorf("Output = %s, want {\"n\":7}", got)
			}
			if st.Turns != 2 || st.ToolCalls != 1 || st.Corrections != 0 {
				t.Errorf("turns, tool calls, corrections = %d, %d, %d; want 2, 1, 0", st.Turns, st.ToolCalls, st.Corrections)
			}
			if diff := cmp.Diff([]string{`{"id":7}`}, lookups.list()); diff != "" {
				t.Errorf("lookup calls (-want +got):\n%s", diff)
			}
			var reqs []sentRequest
			for _, b := range s.requests() {
				reqs = append(reqs, decodeSent(t, b))
			}
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			checkOffered(t, reqs, mode.name == "stream", "lookup", "output")
			want := []string{
				"user text:What is id 7?",
				`assistant tool_use:toolu_1:lookup:{"id":7}`,
				"user tool_result:toolu_1:seven",
			}
			if diff := cmp.Diff(want, reqs[1].conversation()); diff != "" {
				t.Errorf("second request's conversation (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentMixedCall runs an agent whose first answer calls the job's tool
// and the output tool in one message: the tool runs, the early answer is
// dropped, the next request holds only the call answered (every tool_use
// with its tool_result), and the answer of the second turn is the output.
func TestAgentMixedCall(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			s := newScript(t,
				turn{"tool_use", []string{
					textBlock("Checking."),
					toolUse("toolu_1", "output", `{"n": 1}`),
					toolUse("toolu_2", "lookup", `{"id": 7}`),
				}},
				turn{"tool_use", []string{textBlock("So:"), toolUse("toolu_3", "output", `{"n": 7}`)}},
			)
			var lookups calls
			m := newModel(t, anthropic.Config{BaseURL: s.srv.URL})
			st, err := runAgent(t, mode.wrap(m), lookups.tool(lookupDef, "seven"))
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if got := string(st.Output); got != `{"n":7}` {
				t.Errorf("Output = %s, want {\"n\":7}", got)
			}
			if diff := cmp.Diff([]string{`{"id":7}`}, lookups.list()); diff != "" {
				t.Errorf("lookup calls (-want +got):\n%s", diff)
			}
			var reqs []sentRequest
			for _, b := range s.requests() {
				reqs = append(reqs, decodeSent(t, b))
			}
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			checkOffered(t, reqs, mode.name == "stream", "lookup", "output")
			want := []string{
				"user text:What is id 7?",
				"assistant text:Checking.",
				`assistant tool_use:toolu_2:lookup:{"id":7}`,
				"user tool_result:toolu_2:seven",
			}
			if diff := cmp.Diff(want, reqs[1].conversation()); diff != "" {
				t.Errorf("second request's conversation (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentOutputNameClash runs an agent whose job has a tool named like
// the output ("output"): the output tool is offered as output_2, a call of
// "output" runs the job's tool, and a call of output_2 is the answer.
func TestAgentOutputNameClash(t *testing.T) {
	outputDef := llm.ToolDef{Name: "output", Description: "Print a line.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"line":{"type":"string"}}}`)}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			s := newScript(t,
				turn{"tool_use", []string{toolUse("toolu_1", "output", `{"line":"hi"}`)}},
				turn{"tool_use", []string{toolUse("toolu_2", "output_2", `{"n":7}`)}},
			)
			var prints calls
			m := newModel(t, anthropic.Config{BaseURL: s.srv.URL})
			st, err := runAgent(t, mode.wrap(m), prints.tool(outputDef, "printed"))
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if got := string(st.Output); got != `{"n":7}` {
				t.Errorf("Output = %s, want {\"n\":7}", got)
			}
			if diff := cmp.Diff([]string{`{"line":"hi"}`}, prints.list()); diff != "" {
				t.Errorf("calls of the job's output tool (-want +got):\n%s", diff)
			}
			var reqs []sentRequest
			for _, b := range s.requests() {
				reqs = append(reqs, decodeSent(t, b))
			}
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			checkOffered(t, reqs, mode.name == "stream", "output", "output_2")
		})
	}
}

// TestOutputWithToolsAnswers checks how Generate and Stream read the
// answers to a request with tools and structured output.
func TestOutputWithToolsAnswers(t *testing.T) {
	clash := []llm.ToolDef{{Name: "output"}, lookupDef}
	tests := []struct {
		name  string
		tools []llm.ToolDef
		out   *llm.OutputSpec
		turn  turn
		want  llm.Message
		stop  llm.FinishReason
	}{
		{
			name:  "output tool alone: the answer, text dropped",
			tools: []llm.ToolDef{lookupDef},
			out:   &llm.OutputSpec{Schema: json.RawMessage(answerSchema)},
			turn:  turn{"tool_use", []string{textBlock("Here."), toolUse("toolu_1", "output", `{"n": 7}`)}},
			want:  llm.Message{Content: `{"n":7}`},
			stop:  llm.FinishStop,
		},
		{
			name:  "wrapped output, unwrapped",
			tools: []llm.ToolDef{lookupDef},
			out:   &llm.OutputSpec{Name: "ids", Schema: json.RawMessage(`{"type":"array"}`)},
			turn:  turn{"tool_use", []string{toolUse("toolu_1", "ids", `{"value": [1, 2]}`)}},
			want:  llm.Message{Content: `[1,2]`},
			stop:  llm.FinishStop,
		},
		{
			name:  "output beside a real call: the call, the output dropped",
			tools: []llm.ToolDef{lookupDef},
			out:   &llm.OutputSpec{Schema: json.RawMessage(answerSchema)},
			turn: turn{"tool_use", []string{textBlock("Checking."),
				toolUse("toolu_1", "output", `{"n": 1}`), toolUse("toolu_2", "lookup", `{"id":7}`)}},
			want: llm.Message{Content: "Checking.", ToolCalls: []llm.ToolCall{{ID: "toolu_2", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)}}},
			stop: llm.FinishToolCalls,
		},
		{
			name:  "a job tool named output is a tool call",
			tools: clash,
			out:   &llm.OutputSpec{Schema: json.RawMessage(answerSchema)},
			turn:  turn{"tool_use", []string{toolUse("toolu_1", "output", `{"line":"x"}`)}},
			want:  llm.Message{ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "output", Arguments: json.RawMessage(`{"line":"x"}`)}}},
			stop:  llm.FinishToolCalls,
		},
		{
			name:  "the renamed output tool is the answer",
			tools: clash,
			out:   &llm.OutputSpec{Schema: json.RawMessage(answerSchema)},
			turn:  turn{"tool_use", []string{toolUse("toolu_1", "output_2", `{"n":7}`)}},
			want:  llm.Message{Content: `{"n":7}`},
			stop:  llm.FinishStop,
		},
		{
			name:  "text alone is the answer",
			tools: []llm.ToolDef{lookupDef},
			out:   &llm.OutputSpec{Schema: json.RawMessage(answerSchema)},
			turn:  turn{"end_turn", []string{textBlock(`{"n": 7}`)}},
			want:  llm.Message{Content: `{"n": 7}`},
			stop:  llm.FinishStop,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Tools: tt.tools, Output: tt.out}
			want := &llm.Response{Message: tt.want, FinishReason: tt.stop, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 7}}
			want.Message.Role = llm.RoleAssistant

			m := newModel(t, anthropic.Config{BaseURL: newScript(t, tt.turn).srv.URL})
			got, err := m.Generate(t.Context(), req)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Generate (-want +got):\n%s", diff)
			}

			m = newModel(t, anthropic.Config{BaseURL: newScript(t, tt.turn).srv.URL})
			evs, err := collect(m.Stream(t.Context(), req))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(want, accumulate(evs)); diff != "" {
				t.Errorf("Stream (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOutputNameLength checks that a renamed output tool keeps within the
// API's 64 characters.
func TestOutputNameLength(t *testing.T) {
	long := strings.Repeat("a", 64)
	s := newScript(t, turn{"end_turn", []string{textBlock("{}")}})
	m := newModel(t, anthropic.Config{BaseURL: s.srv.URL})
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}},
		Tools: []llm.ToolDef{{Name: long}}, Output: &llm.OutputSpec{Name: long, Schema: json.RawMessage(answerSchema)}}
	if _, err := m.Generate(t.Context(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	r := decodeSent(t, s.requests()[0])
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{long, long[:62] + "_2"}; !cmp.Equal(want, names) {
		t.Errorf("tools %q, want %q", names, want)
	}
}
