package bedrock_test

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
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// This file tests structured output for agents with tools: the output tool
// offered beside the job's tools with toolChoice any, run through the agent
// loop against a server speaking Converse and ConverseStream.

// claude is a model ID of a family that takes toolChoice any.
const claude = "anthropic.claude-3-5-haiku-20241022-v1:0"

// answerSchema is the output schema of the agents of this file.
const answerSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// lookupDef is the job's tool: it answers "seven".
var lookupDef = llm.ToolDef{Name: "lookup", Description: "Look up an id.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)}

// script is a server speaking Bedrock's wire format that answers its i-th
// request with turns[i]: a Converse JSON body, or a ConverseStream event
// stream. It keeps the bodies of the requests.
type script struct {
	srv   *httptest.Server
	turns []turn

	mu     sync.Mutex // protects bodies
	bodies [][]byte
}

// turn is one answer: its content blocks, as Converse's JSON has them, and
// its stopReason.
type turn struct {
	stop   string
	blocks []string
}

func textBlock(text string) string {
	b, _ := json.Marshal(map[string]string{"text": text})
	return string(b)
}

func toolUse(id, name, input string) string {
	return `{"toolUse":{"toolUseId":"` + id + `","name":"` + name + `","input":` + input + `}}`
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
			writeError(w, http.StatusBadRequest, "ValidationException", "no more turns")
			return
		}
		tn := s.turns[i]
		if !strings.HasSuffix(r.URL.Path, "/converse-stream") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"output":{"message":{"role":"assistant","content":[%s]}},"stopReason":%q,`+
				`"usage":{"inputTokens":5,"outputTokens":5,"totalTokens":26,"cacheReadInputTokens":16,"cacheWriteInputTokens":0},"metrics":{"latencyMs":12}}`,
				strings.Join(tn.blocks, ","), tn.stop)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		for _, fr := range streamTurn(t, tn) {
			_, _ = w.Write(fr)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// streamTurn renders a turn as ConverseStream events: text in two deltas,
// a tool's input in two fragments.
func streamTurn(t *testing.T, tn turn) [][]byte {
	frames := [][]byte{messageStart(t)}
	for i, raw := range tn.blocks {
		var b wireBlock
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Errorf("block %s: %v", raw, err)
			continue
		}
		switch {
		case b.Text != nil:
			half := len(*b.Text) / 2
			frames = append(frames, textDelta(t, i, (*b.Text)[:half]), textDelta(t, i, (*b.Text)[half:]))
		case b.ToolUse != nil:
			in := string(b.ToolUse.Input)
			half := len(in) / 2
			frames = append(frames, toolStart(t, i, b.ToolUse.ToolUseID, b.ToolUse.Name), toolDelta(t, i, in[:half]), toolDelta(t, i, in[half:]))
		}
		frames = append(frames, blockStop(t, i))
	}
	return append(frames, messageStop(t, tn.stop), metadata(t))
}

// requests returns the bodies of the requests received so far, decoded.
func (s *script) requests(t *testing.T) []wireRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var reqs []wireRequest
	for _, b := range s.bodies {
		var r wireRequest
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("request body is not JSON: %v\n%s", err, b)
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// conversation renders the messages of r, a block a line.
func conversation(r wireRequest) []string {
	var out []string
	for _, m := range r.Messages {
		for _, b := range m.Content {
			out = append(out, m.Role+" "+blockString(b))
		}
	}
	return out
}

// checkPairing reports what Converse refuses about tool use in r: a
// toolUse block without a toolResult in the next message, or a toolResult
// that answers no toolUse of the message before.
func checkPairing(t *testing.T, r wireRequest) {
	t.Helper()
	for i, m := range r.Messages {
		if m.Role != "assistant" {
			continue
		}
		uses := map[string]bool{}
		for _, b := range m.Content {
			if b.ToolUse != nil {
				uses[b.ToolUse.ToolUseID] = true
			}
		}
		results := map[string]bool{}
		if i+1 < len(r.Messages) {
			for _, b := range r.Messages[i+1].Content {
				if b.ToolResult != nil {
					results[b.ToolResult.ToolUseID] = true
				}
			}
		}
		if diff := cmp.Diff(uses, results); diff != "" {
			t.Errorf("message %d: toolUse ids (-) and the toolResult ids after them (+) differ:\n%s", i, diff)
		}
	}
}

// toolNames returns the names of the tools r offers.
func toolNames(r wireRequest) []string {
	var names []string
	if r.ToolConfig != nil {
		for _, tl := range r.ToolConfig.Tools {
			if tl.ToolSpec != nil {
				names = append(names, tl.ToolSpec.Name)
			}
		}
	}
	return names
}

// toolChoice returns the compact toolChoice of r, or "" without one.
func toolChoice(r wireRequest) string {
	if r.ToolConfig == nil || len(r.ToolConfig.ToolChoice) == 0 {
		return ""
	}
	return compact(r.ToolConfig.ToolChoice)
}

// checkOffered checks that every request offers tools (by name), the last
// being the output tool with answerSchema, with toolChoice any, and has
// every toolUse answered.
func checkOffered(t *testing.T, reqs []wireRequest, tools ...string) {
	t.Helper()
	for i, r := range reqs {
		if diff := cmp.Diff(tools, toolNames(r)); diff != "" {
			t.Errorf("request %d: tools (-want +got):\n%s", i+1, diff)
		}
		if r.ToolConfig != nil {
			var last json.RawMessage
			for _, tl := range r.ToolConfig.Tools {
				if tl.ToolSpec != nil {
					last = tl.ToolSpec.InputSchema.JSON
				}
			}
			if got := compact(last); got != compact(json.RawMessage(answerSchema)) {
				t.Errorf("request %d: output tool's schema %s, want %s", i+1, got, answerSchema)
			}
		}
		if got := toolChoice(r); got != `{"any":{}}` {
			t.Errorf("request %d: toolChoice = %s, want {\"any\":{}}", i+1, got)
		}
		checkPairing(t, r)
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
	wrap func(*bedrock.Model) llm.Model
}{
	{"converse", func(m *bedrock.Model) llm.Model { return generateOnly{m} }},
	{"converse-stream", func(m *bedrock.Model) llm.Model { return m }},
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
	r, err := agent.New(agent.Config{Model: m, System: "Answer with a number.", Tools: pool, Schema: sch, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is id 7?"}}}
	return st, r.Run(t.Context(), st)
}

// TestAgentToolThenOutput runs a two-turn agent: it calls the job's tool,
// then answers through the output tool. Each request offers both tools
// with toolChoice any, and the agent's output is the output tool's input.
func TestAgentToolThenOutput(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			s := newScript(t,
				turn{"tool_use", []string{toolUse("tooluse_1", "lookup", `{"id": 7}`)}},
				turn{"tool_use", []string{toolUse("tooluse_2", "output", `{"n": 7}`)}},
			)
			var lookups calls
			m := newModelWith(t, bedrockConfig(s.srv.URL, claude))
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
			reqs := s.requests(t)
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			checkOffered(t, reqs, "lookup", "output")
			want := []string{
				"user text:What is id 7?",
				`assistant toolUse:tooluse_1:lookup:{"id":7}`,
				"user toolResult:tooluse_1:seven:",
			}
			if diff := cmp.Diff(want, conversation(reqs[1])); diff != "" {
				t.Errorf("second request's conversation (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentMixedCall runs an agent whose first answer calls the job's tool
// and the output tool in one message: the tool runs, the early answer is
// dropped, the next request holds only the call answered (every toolUse
// with its toolResult), and the answer of the second turn is the output.
func TestAgentMixedCall(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			s := newScript(t,
				turn{"tool_use", []string{
					textBlock("Checking."),
					toolUse("tooluse_1", "output", `{"n": 1}`),
					toolUse("tooluse_2", "lookup", `{"id": 7}`),
				}},
				turn{"tool_use", []string{textBlock("So:"), toolUse("tooluse_3", "output", `{"n": 7}`)}},
			)
			var lookups calls
			m := newModelWith(t, bedrockConfig(s.srv.URL, claude))
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
			reqs := s.requests(t)
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			checkOffered(t, reqs, "lookup", "output")
			want := []string{
				"user text:What is id 7?",
				"assistant text:Checking.",
				`assistant toolUse:tooluse_2:lookup:{"id":7}`,
				"user toolResult:tooluse_2:seven:",
			}
			if diff := cmp.Diff(want, conversation(reqs[1])); diff != "" {
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
				turn{"tool_use", []string{toolUse("tooluse_1", "output", `{"line":"hi"}`)}},
				turn{"tool_use", []string{toolUse("tooluse_2", "output_2", `{"n":7}`)}},
			)
			var prints calls
			m := newModelWith(t, bedrockConfig(s.srv.URL, claude))
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
			reqs := s.requests(t)
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			checkOffered(t, reqs, "output", "output_2")
		})
	}
}

// TestOutputToolChoice checks the tool choice sent with an output tool:
// the output tool forced without other tools, any with them for the model
// families that take it, none (auto) for the others.
func TestOutputToolChoice(t *testing.T) {
	out := &llm.OutputSpec{Schema: json.RawMessage(answerSchema)}
	tests := []struct {
		name   string
		model  string
		tools  []llm.ToolDef
		out    *llm.OutputSpec
		names  []string
		choice string
	}{
		{"no output", claude, []llm.ToolDef{lookupDef}, nil, []string{"lookup"}, ""},
		{"output alone is forced, whatever the model", "meta.llama3-1-70b-instruct-v1:0", nil, out, []string{"output"}, `{"tool":{"name":"output"}}`},
		{"claude", claude, []llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, `{"any":{}}`},
		{"claude inference profile", "us.anthropic.claude-sonnet-4-20250514-v1:0", []llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, `{"any":{}}`},
		{"claude inference profile ARN", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0",
			[]llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, `{"any":{}}`},
		{"nova", "amazon.nova-pro-v1:0", []llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, `{"any":{}}`},
		{"mistral large", "mistral.mistral-large-2407-v1:0", []llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, `{"any":{}}`},
		{"llama falls back to auto", "meta.llama3-1-70b-instruct-v1:0", []llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, ""},
		{"provisioned model ARN falls back to auto", "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123",
			[]llm.ToolDef{lookupDef}, out, []string{"lookup", "output"}, ""},
		{"name clash", claude, []llm.ToolDef{{Name: "output"}, {Name: "output_2"}}, out, []string{"output", "output_2", "output_3"}, `{"any":{}}`},
		{"long name clash keeps to 64 characters", claude, []llm.ToolDef{{Name: strings.Repeat("a", 64)}},
			&llm.OutputSpec{Name: strings.Repeat("a", 64), Schema: out.Schema}, []string{strings.Repeat("a", 64), strings.Repeat("a", 62) + "_2"}, `{"any":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScript(t, turn{"end_turn", []string{textBlock("{}")}})
			m := newModelWith(t, bedrockConfig(s.srv.URL, tt.model))
			req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Tools: tt.tools, Output: tt.out}
			if _, err := m.Generate(t.Context(), req); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			r := s.requests(t)[0]
			if diff := cmp.Diff(tt.names, toolNames(r)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if got := toolChoice(r); got != tt.choice {
				t.Errorf("toolChoice = %s, want %s", got, tt.choice)
			}
		})
	}
}

// TestOutputWithToolsAnswers checks how Generate and Stream read the
// answers to a request with tools and structured output.
func TestOutputWithToolsAnswers(t *testing.T) {
	out := &llm.OutputSpec{Schema: json.RawMessage(answerSchema)}
	clash := []llm.ToolDef{{Name: "output"}, lookupDef}
	tests := []struct {
		name  string
		tools []llm.ToolDef
		turn  turn
		want  llm.Message
		stop  llm.FinishReason
	}{
		{
			name:  "output tool alone: the answer, text dropped",
			tools: []llm.ToolDef{lookupDef},
			turn:  turn{"tool_use", []string{textBlock("Here."), toolUse("tooluse_1", "output", `{"n": 7}`)}},
			want:  llm.Message{Content: `{"n":7}`},
			stop:  llm.FinishStop,
		},
		{
			name:  "two output calls: the first counts",
			tools: []llm.ToolDef{lookupDef},
			turn:  turn{"tool_use", []string{toolUse("tooluse_1", "output", `{"n": 7}`), toolUse("tooluse_2", "output", `{"n": 8}`)}},
			want:  llm.Message{Content: `{"n":7}`},
			stop:  llm.FinishStop,
		},
		{
			name:  "output beside a real call: the call, the output dropped",
			tools: []llm.ToolDef{lookupDef},
			turn: turn{"tool_use", []string{textBlock("Checking."),
				toolUse("tooluse_1", "output", `{"n": 1}`), toolUse("tooluse_2", "lookup", `{"id":7}`)}},
			want: llm.Message{Content: "Checking.", ToolCalls: []llm.ToolCall{{ID: "tooluse_2", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)}}},
			stop: llm.FinishToolCalls,
		},
		{
			name:  "a job tool named output is a tool call",
			tools: clash,
			turn:  turn{"tool_use", []string{toolUse("tooluse_1", "output", `{"line":"x"}`)}},
			want:  llm.Message{ToolCalls: []llm.ToolCall{{ID: "tooluse_1", Name: "output", Arguments: json.RawMessage(`{"line":"x"}`)}}},
			stop:  llm.FinishToolCalls,
		},
		{
			name:  "the renamed output tool is the answer",
			tools: clash,
			turn:  turn{"tool_use", []string{toolUse("tooluse_1", "output_2", `{"n":7}`)}},
			want:  llm.Message{Content: `{"n":7}`},
			stop:  llm.FinishStop,
		},
		{
			name:  "text alone is the answer",
			tools: []llm.ToolDef{lookupDef},
			turn:  turn{"end_turn", []string{textBlock(`{"n": 7}`)}},
			want:  llm.Message{Content: `{"n": 7}`},
			stop:  llm.FinishStop,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Tools: tt.tools, Output: out}
			want := tt.want
			want.Role = llm.RoleAssistant

			m := newModelWith(t, bedrockConfig(newScript(t, tt.turn).srv.URL, claude))
			got, err := m.Generate(t.Context(), req)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if diff := cmp.Diff(want, got.Message); diff != "" {
				t.Errorf("Generate message (-want +got):\n%s", diff)
			}
			if got.FinishReason != tt.stop {
				t.Errorf("Generate finish reason %q, want %q", got.FinishReason, tt.stop)
			}

			m = newModelWith(t, bedrockConfig(newScript(t, tt.turn).srv.URL, claude))
			var acc llm.Accumulator
			for ev, err := range m.Stream(t.Context(), req) {
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				if err := acc.Add(ev); err != nil {
					t.Fatalf("Accumulator.Add(%+v) = %v", ev, err)
				}
			}
			streamed := acc.Response()
			if diff := cmp.Diff(want, streamed.Message); diff != "" {
				t.Errorf("Stream message (-want +got):\n%s", diff)
			}
			if streamed.FinishReason != tt.stop {
				t.Errorf("Stream finish reason %q, want %q", streamed.FinishReason, tt.stop)
			}
		})
	}
}
