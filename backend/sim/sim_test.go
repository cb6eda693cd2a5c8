package sim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

var (
	_ llm.Model    = (*sim.Model)(nil)
	_ llm.Streamer = (*sim.Model)(nil)
)

// decodeArgs decodes tool-call arguments into a map.
func decodeArgs(t *testing.T, c llm.ToolCall) map[string]any {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		t.Fatalf("tool call %s arguments %s: %v", c.Name, c.Arguments, err)
	}
	return args
}

func TestToolTurn(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{Seed: 1})
	req := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You review code."},
			{Role: llm.RoleUser, Content: "Review path: src/main.go please"},
		},
		Tools:  []llm.ToolDef{readFileTool, grepTool, noArgsTool},
		Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"object"}`)},
	}
	resp := generate(t, t.Context(), m, req)
	if resp.FinishReason != llm.FinishToolCalls || resp.Message.Content != "" || resp.Message.Role != llm.RoleAssistant {
		t.Errorf("Generate = finish %q, content %q, role %q, want tool_calls, no content, assistant", resp.FinishReason, resp.Message.Content, resp.Message.Role)
	}
	var ids, names []string
	for _, c := range resp.Message.ToolCalls {
		ids = append(ids, c.ID)
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"call_0_0", "call_0_1", "call_0_2"}, ids); diff != "" {
		t.Errorf("tool call IDs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"read_file", "grep", "list_files"}, names); diff != "" {
		t.Errorf("tool call names (-want +got):\n%s", diff)
	}
	if len(resp.Message.ToolCalls) != 3 {
		t.FailNow()
	}
	if diff := cmp.Diff(map[string]any{"path": "src/main.go"}, decodeArgs(t, resp.Message.ToolCalls[0])); diff != "" {
		t.Errorf("read_file arguments (-want +got):\n%s", diff)
	}
	// Arguments validate against the tool's parameters, the path is copied
	// from the task and the default is honoured.
	grep := resp.Message.ToolCalls[1]
	s, err := schema.Compile(grepTool.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(grep.Arguments); err != nil {
		t.Errorf("grep arguments %s: Validate = %v, want nil", grep.Arguments, err)
	}
	if args := decodeArgs(t, grep); args["path"] != "src/main.go" || args["pattern"] != "TODO" {
		t.Errorf("grep arguments = %s, want path src/main.go and pattern TODO", grep.Arguments)
	}
	if got := string(resp.Message.ToolCalls[2].Arguments); got != "{}" {
		t.Errorf("list_files arguments = %s, want {}", got)
	}
}

func TestToolArgsFromTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		task string
		want string // the path argument; empty means generated
	}{
		{"Review path: src/main.go please", "src/main.go"},
		{"Review path=src/main.go.", "src/main.go"},
		{"path:docs/a.md, then stop", "docs/a.md"},
		{`Open path: "notes/b c.txt"`, "notes/b c.txt"},
		{"Open path: 'quoted.txt';", "quoted.txt"},
		{"first filepath: nope, then path: yes.txt", "yes.txt"},
		{"Line one\npath:\tnext.go", "next.go"},
		{"path:   spaced.go", "spaced.go"},
		{"path:\nnot-a-value", ""},
		{"path", ""},
		{"xpath: no", ""},
		{"path: ", ""},
		{`path: a"b\c`, `a"b\c`},
		{"path: naïve/ünïcode.go", "naïve/ünïcode.go"},
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{})
			resp := generate(t, t.Context(), m, &llm.Request{Messages: user(tt.task), Tools: []llm.ToolDef{readFileTool}})
			if len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("Generate(%q) = %d tool calls, want 1", tt.task, len(resp.Message.ToolCalls))
			}
			got, _ := decodeArgs(t, resp.Message.ToolCalls[0])["path"].(string)
			if tt.want == "" {
				// Generated: words of the simulator, nothing from the task.
				if got == "" || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz ") != "" {
					t.Errorf("Generate(%q) path = %q, want generated words", tt.task, got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Generate(%q) path = %q, want %q", tt.task, got, tt.want)
			}
		})
	}
}

// TestToolArgsFromInput checks that a tool's arguments take the values of
// the input's fields (llm.Request.Input) and of the task's text where a
// parameter's name or description matches a field, the way a user means
// it: by the same name in any case or spelling, or a description that
// mentions the field; and that a value is taken only where it fits the
// parameter.
func TestToolArgsFromInput(t *testing.T) {
	t.Parallel()
	param := func(name, typ, desc string) llm.ToolDef {
		p := map[string]any{"type": typ}
		if desc != "" {
			p["description"] = desc
		}
		b, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{name: p}, "required": []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		return llm.ToolDef{Name: "tool", Parameters: b}
	}
	enumTool := llm.ToolDef{Name: "tool", Parameters: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string","enum":["fast","slow"]}},"required":["mode"]}`)}
	tests := []struct {
		name  string
		tool  llm.ToolDef
		input map[string]any
		task  string
		want  any // the argument; nil means generated, not from the input
	}{
		{"description mentions field", param("path", "string", "the file to read"), map[string]any{"file": "a.go"}, "Summarise {file}", "a.go"},
		{"same name", param("path", "string", ""), map[string]any{"path": "b.go", "file": "no"}, "x", "b.go"},
		{"other case", param("Path", "string", ""), map[string]any{"path": "c.go"}, "x", "c.go"},
		{"camel for snake", param("filePath", "string", ""), map[string]any{"file_path": "d.go"}, "x", "d.go"},
		{"snake for camel", param("file_path", "string", ""), map[string]any{"FilePath": "e.go"}, "x", "e.go"},
		{"kebab", param("file_path", "string", ""), map[string]any{"file-path": "f.go"}, "x", "f.go"},
		{"name beats description", param("path", "string", "the file to read"), map[string]any{"file": "no.go", "PATH": "g.go"}, "x", "g.go"},
		{"earliest mention wins", param("q", "string", "the user's query, or the topic"), map[string]any{"topic": "no", "query": "h"}, "x", "h"},
		{"two-word field mentioned", param("p", "string", "path of the file name"), map[string]any{"file_name": "i.txt"}, "x", "i.txt"},
		{"run-together mention", param("p", "string", "the filename"), map[string]any{"file_name": "j.txt"}, "x", "j.txt"},
		{"word inside another is no mention", param("p", "string", "the profile"), map[string]any{"file": "no"}, "x", nil},
		{"no match", param("path", "string", "where to look"), map[string]any{"file": "no"}, "x", nil},
		{"number as string", param("id", "string", ""), map[string]any{"id": 42.0}, "x", "42"},
		{"integer", param("line", "integer", ""), map[string]any{"line": 7.0}, "x", 7.0},
		{"integer from text", param("line", "integer", ""), map[string]any{"line": "12"}, "x", 12.0},
		{"integer not whole", param("line", "integer", ""), map[string]any{"line": 1.5}, "x", nil},
		{"number", param("score", "number", ""), map[string]any{"score": 0.25}, "x", 0.25},
		{"boolean", param("strict", "boolean", ""), map[string]any{"strict": true}, "x", true},
		{"boolean from text", param("strict", "boolean", ""), map[string]any{"strict": "false"}, "x", false},
		{"object value does not fit a string", param("path", "string", ""), map[string]any{"path": map[string]any{"a": 1.0}}, "x", nil},
		{"input beats task", param("path", "string", ""), map[string]any{"path": "k.go"}, "path: task.go", "k.go"},
		{"task exact beats input description", param("path", "string", "the file"), map[string]any{"file": "no.go"}, "path: l.go", "l.go"},
		{"task text field by description", param("path", "string", "the file to read"), nil, "Read file: m.go now", "m.go"},
		{"task JSON object", param("path", "string", "the file to read"), nil, `Input: {"file": "n.go", "n": 1}`, "n.go"},
		{"task JSON object camel", param("file_path", "string", ""), nil, `row {"filePath":"o.go"} end`, "o.go"},
		{"task quoted value keeps spaces", param("title", "string", ""), nil, `title: "Dune Messiah" by Herbert`, "Dune Messiah"},
		{"task value with = ", param("user_id", "string", ""), nil, "userId=u-17, then stop", "u-17"},
		{"task broken JSON", param("path", "string", ""), nil, `{"path": "p.go"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{})
			req := &llm.Request{Messages: user(tt.task), Tools: []llm.ToolDef{tt.tool}, Input: tt.input}
			resp := generate(t, t.Context(), m, req)
			if len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("Generate = %d tool calls, want 1", len(resp.Message.ToolCalls))
			}
			args := decodeArgs(t, resp.Message.ToolCalls[0])
			if len(args) != 1 {
				t.Fatalf("arguments = %s, want one", resp.Message.ToolCalls[0].Arguments)
			}
			var got any
			for _, v := range args {
				got = v
			}
			if tt.want == nil {
				// Generated: a value of the simulator's, none from the input.
				for _, v := range tt.input {
					if s, ok := got.(string); ok && (s == v || s == fmt.Sprint(v)) {
						t.Errorf("Generate(input %v, task %q) argument = %v, want a generated one", tt.input, tt.task, got)
					}
				}
				if s, ok := got.(string); ok && strings.HasSuffix(s, ".go") {
					t.Errorf("Generate(input %v, task %q) argument = %q, want a generated one", tt.input, tt.task, s)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Generate(input %v, task %q) argument = %#v, want %#v", tt.input, tt.task, got, tt.want)
			}
		})
	}
	t.Run("enum", func(t *testing.T) {
		t.Parallel()
		m := newModel(t, sim.Config{})
		for _, in := range []struct {
			mode string
			ok   bool
		}{{"slow", true}, {"fast", true}, {"medium", false}} {
			resp := generate(t, t.Context(), m, &llm.Request{Messages: user("x"), Tools: []llm.ToolDef{enumTool}, Input: map[string]any{"mode": in.mode}})
			got := decodeArgs(t, resp.Message.ToolCalls[0])["mode"]
			if in.ok && got != in.mode || !in.ok && got != "fast" && got != "slow" {
				t.Errorf("Generate(mode %q) mode = %v, want %q or an enum value", in.mode, got, in.mode)
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		t.Parallel()
		tool := param("path", "string", "the file or the dir")
		in := map[string]any{"dir": "d", "file": "f", "zeta": "z"}
		var first string
		for i := range 20 {
			m := newModel(t, sim.Config{})
			resp := generate(t, t.Context(), m, &llm.Request{Messages: user("x"), Tools: []llm.ToolDef{tool}, Input: in})
			got := string(resp.Message.ToolCalls[0].Arguments)
			if i == 0 {
				first = got
				continue
			}
			if got != first {
				t.Fatalf("Generate run %d arguments = %s, want %s as the first run", i, got, first)
			}
		}
		if first != `{"path":"f"}` {
			t.Errorf("Generate arguments = %s, want {\"path\":\"f\"}", first)
		}
	})
}

func TestToolsFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tools []string
		want  []string // tool calls in order; nil means an answer
	}{
		{"all", nil, []string{"read_file", "grep", "list_files"}},
		{"one", []string{"grep"}, []string{"grep"}},
		{"config order ignored", []string{"list_files", "read_file"}, []string{"read_file", "list_files"}},
		{"unknown name", []string{"delete_everything"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{Tools: tt.tools})
			resp := generate(t, t.Context(), m, &llm.Request{Messages: user("path: x"), Tools: []llm.ToolDef{readFileTool, grepTool, noArgsTool}})
			var got []string
			for i, c := range resp.Message.ToolCalls {
				got = append(got, c.Name)
				if want := fmt.Sprintf("call_0_%d", i); c.ID != want {
					t.Errorf("tool call %d ID = %q, want %q", i, c.ID, want)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tools %v: calls (-want +got):\n%s", tt.tools, diff)
			}
			if tt.want == nil && (resp.FinishReason != llm.FinishStop || resp.Message.Content == "") {
				t.Errorf("Tools %v: finish %q content %q, want an answer", tt.tools, resp.FinishReason, resp.Message.Content)
			}
		})
	}
}

// toolResults is the conversation after resp's tool calls ran.
func toolResults(msgs []llm.Message, resp *llm.Response) []llm.Message {
	msgs = append(msgs, resp.Message)
	for _, c := range resp.Message.ToolCalls {
		msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: "result of " + c.Name})
	}
	return msgs
}

func TestToolTurns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		toolTurns int
		task      string // appended to the task
		want      int    // turns with tool calls
	}{
		{"default", 0, "", sim.DefaultToolTurns},
		{"one", 1, "", 1},
		{"two", 2, "", 2},
		{"five", 5, "", 5},
		{"never", -1, "", 0},
		{"task sets seven", 1, " sim_tool_turns=7", 7},
		{"task sets none", 3, " sim_tool_turns=0.", 0},
		{"task overrides never", -1, " (sim_tool_turns=2)", 2},
		{"directive without a number", 2, " sim_tool_turns=x", 2},
	}
	const out = `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{ToolTurns: tt.toolTurns, Seed: 8})
			msgs := user("Review path: src/main.go please" + tt.task)
			for turn := 0; ; turn++ {
				req := &llm.Request{Messages: msgs, Tools: []llm.ToolDef{readFileTool, grepTool}, Output: &llm.OutputSpec{Schema: json.RawMessage(out)}}
				resp := generate(t, t.Context(), m, req)
				if len(resp.Message.ToolCalls) == 0 {
					if turn != tt.want {
						t.Errorf("ToolTurns %d: answered on turn %d, want turn %d", tt.toolTurns, turn, tt.want)
					}
					if resp.FinishReason != llm.FinishStop || !json.Valid([]byte(resp.Message.Content)) {
						t.Errorf("answer = %q (finish %q), want JSON (stop)", resp.Message.Content, resp.FinishReason)
					}
					break
				}
				if turn >= tt.want {
					t.Fatalf("ToolTurns %d: tool calls on turn %d, want an answer", tt.toolTurns, turn)
				}
				for i, c := range resp.Message.ToolCalls {
					if want := fmt.Sprintf("call_%d_%d", turn, i); c.ID != want {
						t.Errorf("turn %d: tool call ID %q, want %q", turn, c.ID, want)
					}
				}
				msgs = toolResults(msgs, resp)
			}
		})
	}
}

func TestNoToolsAnswersDirectly(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{ToolTurns: 3})
	resp := generate(t, t.Context(), m, answerRequest("Review path: src/main.go please", `{"type":"integer"}`))
	if len(resp.Message.ToolCalls) != 0 || resp.FinishReason != llm.FinishStop {
		t.Fatalf("Generate without tools = %d tool calls (finish %q), want an answer", len(resp.Message.ToolCalls), resp.FinishReason)
	}
	var n int
	if err := json.Unmarshal([]byte(resp.Message.Content), &n); err != nil {
		t.Errorf("answer %q is not an integer: %v", resp.Message.Content, err)
	}
}

func TestFeedbackAnswers(t *testing.T) {
	t.Parallel()
	// After an answer and the caller's feedback the model answers again
	// rather than going back to tools, even with tool turns left.
	m := newModel(t, sim.Config{ToolTurns: 3})
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "path: a.go"},
		{Role: llm.RoleAssistant, Content: "not JSON"},
		{Role: llm.RoleUser, Content: "Answer with JSON."},
	}
	resp := generate(t, t.Context(), m, &llm.Request{Messages: msgs, Tools: []llm.ToolDef{readFileTool}, Output: &llm.OutputSpec{Schema: json.RawMessage(`{"type":"boolean"}`)}})
	if len(resp.Message.ToolCalls) != 0 || (resp.Message.Content != "true" && resp.Message.Content != "false") {
		t.Errorf("Generate after feedback = %q, %d tool calls, want a boolean answer", resp.Message.Content, len(resp.Message.ToolCalls))
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{FailRate: 1})
	for i := range 10 {
		resp, err := m.Generate(t.Context(), answerRequest(fmt.Sprint(i), `{"type":"integer"}`))
		if resp != nil {
			t.Errorf("Generate = %+v, want nil with the error", resp)
		}
		if !errors.Is(err, llm.ErrOverloaded) || !llm.IsTransient(err) {
			t.Fatalf("Generate = %v, want a transient error wrapping llm.ErrOverloaded", err)
		}
		apiErr, ok := errors.AsType[*llm.APIError](err)
		if !ok || apiErr.StatusCode != 503 || apiErr.Backend != "sim" {
			t.Fatalf("Generate = %#v, want an *llm.APIError from sim with status 503", err)
		}
	}
	// Stream fails the same way, in its only event.
	var events int
	for _, err := range m.Stream(t.Context(), answerRequest("s", `{"type":"integer"}`)) {
		events++
		if !errors.Is(err, llm.ErrOverloaded) {
			t.Errorf("Stream event error = %v, want llm.ErrOverloaded", err)
		}
	}
	if events != 1 {
		t.Errorf("Stream yielded %d events, want 1 error", events)
	}
	if got, want := m.Stats(), (sim.Stats{Calls: 11, Failures: 11}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestFailRate(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{0, 1, 2} {
		m := newModel(t, sim.Config{FailRate: 0.5, Seed: seed})
		const n = 1000
		failed := 0
		for i := range n {
			_, err := m.Generate(t.Context(), &llm.Request{Messages: user(fmt.Sprint(i))})
			switch {
			case err == nil:
			case errors.Is(err, llm.ErrOverloaded):
				failed++
			default:
				t.Fatalf("Generate = %v, want nil or llm.ErrOverloaded", err)
			}
		}
		if failed < 430 || failed > 570 {
			t.Errorf("seed %d, FailRate 0.5: %d of %d calls failed, want about 500", seed, failed, n)
		}
		if got, want := m.Stats(), (sim.Stats{Calls: n, Failures: int64(failed)}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
	}
}

func TestFailuresReproducible(t *testing.T) {
	t.Parallel()
	pattern := func() []bool {
		m := newModel(t, sim.Config{FailRate: 0.3, Seed: 11})
		var failed []bool
		for i := range 100 {
			_, err := m.Generate(t.Context(), &llm.Request{Messages: user(fmt.Sprint(i))})
			failed = append(failed, err != nil)
		}
		return failed
	}
	if diff := cmp.Diff(pattern(), pattern()); diff != "" {
		t.Errorf("failures differ between two models with seed 11 (-first +second):\n%s", diff)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{ToolTurns: 3})
	msgs := user("Review path: src/main.go please")
	var prev int64
	for turn := range 4 {
		resp := generate(t, t.Context(), m, &llm.Request{Messages: msgs, Tools: []llm.ToolDef{readFileTool, grepTool}})
		u := resp.Usage
		if u.PromptTokens <= prev {
			t.Errorf("turn %d: PromptTokens = %d, want more than the previous turn's %d", turn, u.PromptTokens, prev)
		}
		if u.CompletionTokens <= 0 || u.Total() != u.PromptTokens+u.CompletionTokens {
			t.Errorf("turn %d: Usage = %+v, want completion tokens > 0", turn, u)
		}
		prev = u.PromptTokens
		msgs = toolResults(msgs, resp)
	}
	// More tools in the request mean a longer prompt.
	small := generate(t, t.Context(), m, &llm.Request{Messages: user("x"), Tools: []llm.ToolDef{noArgsTool}}).Usage.PromptTokens
	big := generate(t, t.Context(), m, &llm.Request{Messages: user("x"), Tools: []llm.ToolDef{noArgsTool, grepTool}}).Usage.PromptTokens
	if big <= small {
		t.Errorf("PromptTokens with grep = %d, without = %d, want more with it", big, small)
	}
	// A longer answer costs more completion tokens.
	short := generate(t, t.Context(), m, answerRequest("x", `{"const":1}`)).Usage.CompletionTokens
	long := generate(t, t.Context(), m, answerRequest("x", `{"type":"string","minLength":400}`)).Usage.CompletionTokens
	if short != 1 || long < 100 {
		t.Errorf("CompletionTokens = %d for 1 and %d for a 400-character string, want 1 and at least 100", short, long)
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		req        *llm.Request
		badRequest bool // an *llm.APIError wrapping llm.ErrBadRequest
	}{
		{"no messages", &llm.Request{}, true},
		{"no messages with tools", &llm.Request{Tools: []llm.ToolDef{readFileTool}}, true},
		{"output schema not JSON", answerRequest("x", `{"type":`), false},
		{"output schema not an object", answerRequest("x", `42`), false},
		{"unresolvable $ref", answerRequest("x", `{"$ref":"#/$defs/missing"}`), false},
		{"remote $ref", answerRequest("x", `{"$ref":"https://example.com/s.json"}`), false},
		{"self-referencing allOf", answerRequest("x", `{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"},{"type":"string"}]}},"$ref":"#/$defs/a"}`), false},
		{"tool parameters not JSON", &llm.Request{Messages: user("x"), Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{`)}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{})
			resp, err := m.Generate(t.Context(), tt.req)
			if err == nil || resp != nil {
				t.Fatalf("Generate(%s) = %v, %v, want an error", reqString(tt.req), resp, err)
			}
			if llm.IsTransient(err) {
				t.Errorf("Generate(%s) = %v, want a permanent error", reqString(tt.req), err)
			}
			if _, isAPI := errors.AsType[*llm.APIError](err); tt.badRequest != (isAPI && errors.Is(err, llm.ErrBadRequest)) {
				t.Errorf("Generate(%s) = %v, want *llm.APIError wrapping llm.ErrBadRequest: %t", reqString(tt.req), err, tt.badRequest)
			}
			var events int
			for _, serr := range m.Stream(t.Context(), tt.req) {
				events++
				if serr == nil || serr.Error() != err.Error() {
					t.Errorf("Stream(%s) error = %v, want %v", reqString(tt.req), serr, err)
				}
			}
			if events != 1 {
				t.Errorf("Stream(%s) yielded %d events, want 1 error", reqString(tt.req), events)
			}
		})
	}
}

// collect runs Stream through an llm.Accumulator.
func collect(t *testing.T, m *sim.Model, req *llm.Request) (*llm.Response, []llm.Event) {
	t.Helper()
	var acc llm.Accumulator
	var events []llm.Event
	for ev, err := range m.Stream(t.Context(), req) {
		if err != nil {
			t.Fatalf("Stream(%s) = %v", reqString(req), err)
		}
		acc.Add(ev)
		events = append(events, ev)
	}
	return acc.Response(), events
}

func TestStreamReassembly(t *testing.T) {
	t.Parallel()
	tools := []llm.ToolDef{readFileTool, grepTool, noArgsTool}
	firstTurn := &llm.Request{Messages: user("Review path: src/main.go please"), Tools: tools}
	msgs := toolResults(firstTurn.Messages, generate(t, t.Context(), newModel(t, sim.Config{}), firstTurn))
	tests := []struct {
		name string
		req  *llm.Request
	}{
		{"tool calls", firstTurn},
		{"schema answer", &llm.Request{Messages: msgs, Tools: tools, Output: &llm.OutputSpec{Schema: json.RawMessage(readSchema(t, "nested"))}}},
		{"text answer", &llm.Request{Messages: user("Say something.")}},
		{"short answer", answerRequest("x", `{"const":1}`)},
		{"non-ASCII answer", answerRequest("x", `{"const":"héllo wörld"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(5) {
				cfg := sim.Config{Seed: seed, Jitter: 0.3}
				want := generate(t, t.Context(), newModel(t, cfg), tt.req)
				got, events := collect(t, newModel(t, cfg), tt.req)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("seed %d: Stream reassembled (-Generate +Stream):\n%s", seed, diff)
				}
				if last := events[len(events)-1]; last.Type != llm.EventDone {
					t.Errorf("seed %d: last event %+v, want EventDone", seed, last)
				}
				if len(events) < 3 {
					t.Errorf("seed %d: %d events, want the answer split over several", seed, len(events))
				}
				done := 0 // EventToolCallDone events, each right after its call's arguments
				for i, ev := range events {
					if ev.Type == llm.EventText && !utf8.ValidString(ev.Text) {
						t.Errorf("seed %d: text event %q splits a character", seed, ev.Text)
					}
					if ev.Type == llm.EventToolCallDone {
						if prev := events[i-1]; prev.Type != llm.EventToolCall || prev.ToolCall.Index != ev.ToolCall.Index || ev.ToolCall.Index != done {
							t.Errorf("seed %d: EventToolCallDone %+v after %+v, want it after call %d's arguments", seed, ev, prev, done)
						}
						done++
					}
				}
				if done != len(want.Message.ToolCalls) {
					t.Errorf("seed %d: %d EventToolCallDone events, want one per call (%d)", seed, done, len(want.Message.ToolCalls))
				}
			}
		})
	}
}

// TestStreamPieces checks that an answer streams as it grows: the first
// token, then pieces of at most StreamPieceTokens tokens that never split
// a character, which add up to Generate's answer.
func TestStreamPieces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  *llm.Request
	}{
		{"schema answer", answerRequest("x", readSchema(t, "nested"))},
		{"packed answer", packRequest(entrySchema, tasksOf("Issue", 6)...)},
		{"non-ASCII answer", answerRequest("x", `{"const":"`+strings.Repeat("héllo wörld ✓ ", 20)+`"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := generate(t, t.Context(), newModel(t, sim.Config{}), tt.req).Message.Content
			if len(want) <= 4*sim.StreamPieceTokens*sim.BytesPerToken {
				t.Fatalf("answer %q is %d bytes, want a longer one for this test", want, len(want))
			}
			_, events := collect(t, newModel(t, sim.Config{}), tt.req)
			var text strings.Builder
			var pieces []string
			for _, ev := range events {
				if ev.Type != llm.EventText {
					continue
				}
				text.WriteString(ev.Text)
				pieces = append(pieces, ev.Text)
				if !utf8.ValidString(ev.Text) {
					t.Errorf("text event %q splits a character", ev.Text)
				}
			}
			if got := text.String(); got != want {
				t.Errorf("streamed text = %q, want Generate's %q", got, want)
			}
			if least := len(want) / (sim.StreamPieceTokens * sim.BytesPerToken); len(pieces) < least {
				t.Errorf("answer of %d bytes in %d text events, want at least %d", len(want), len(pieces), least)
			}
			for i, p := range pieces[1:] {
				if len(p) > sim.StreamPieceTokens*sim.BytesPerToken {
					t.Errorf("text event %d = %q, %d bytes, want at most %d", i+1, p, len(p), sim.StreamPieceTokens*sim.BytesPerToken)
				}
			}
		})
	}
}

func TestStreamBreak(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{})
	req := &llm.Request{Messages: user("path: a.go"), Tools: []llm.ToolDef{readFileTool}}
	var first llm.Event
	for ev, err := range m.Stream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		first = ev
		break
	}
	if first.Type != llm.EventToolCall || first.ToolCall.Name != "read_file" || first.ToolCall.ID != "call_0_0" {
		t.Errorf("first event = %+v, want the read_file tool call", first)
	}
	// The model is still usable, and goleak (TestMain) finds nothing left.
	got, _ := collect(t, m, req)
	if len(got.Message.ToolCalls) != 1 {
		t.Errorf("Stream after a break = %+v, want one tool call", got.Message)
	}
	if got := m.Stats().Calls; got != 2 {
		t.Errorf("Stats().Calls = %d, want 2", got)
	}
}
