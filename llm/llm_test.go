package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/google/go-cmp/cmp"
)

// TestAccumulator reassembles a stream whose tool-call arguments arrive in
// pieces, two calls interleaved, as OpenAI-compatible servers send them.
func TestAccumulator(t *testing.T) {
	events := []llm.Event{
		{Type: llm.EventText, Text: "Let me "},
		{Type: llm.EventText, Text: "check."},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, ID: "call_a", Name: "read_file"}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 1, ID: "call_b", Name: "lookup"}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, Arguments: `{"pa`}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 1, Arguments: `{"id":`}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, Arguments: `th":"a.go"}`}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 1, Arguments: `7}`}},
		{Type: llm.EventUsage, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 64}},
		{Type: llm.EventDone, FinishReason: llm.FinishToolCalls},
	}
	var acc llm.Accumulator
	for _, ev := range events {
		acc.Add(ev)
	}
	want := &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Content: "Let me check.", ToolCalls: []llm.ToolCall{
			{ID: "call_a", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)},
			{ID: "call_b", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)},
		}},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 64},
	}
	if diff := cmp.Diff(want, acc.Response()); diff != "" {
		t.Errorf("Response() (-want +got):\n%s", diff)
	}
}

func TestAccumulatorInfersFinish(t *testing.T) {
	tests := []struct {
		name   string
		events []llm.Event
		want   llm.FinishReason
		args   string
	}{
		{"text", []llm.Event{{Type: llm.EventText, Text: "hi"}}, llm.FinishStop, ""},
		{"tool without args", []llm.Event{{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{ID: "x", Name: "now"}}}, llm.FinishToolCalls, "{}"},
		{"explicit length", []llm.Event{{Type: llm.EventText, Text: "cut"}, {Type: llm.EventDone, FinishReason: llm.FinishLength}}, llm.FinishLength, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var acc llm.Accumulator
			for _, ev := range tt.events {
				acc.Add(ev)
			}
			r := acc.Response()
			if r.FinishReason != tt.want {
				t.Errorf("FinishReason = %q, want %q", r.FinishReason, tt.want)
			}
			if tt.args != "" && string(r.Message.ToolCalls[0].Arguments) != tt.args {
				t.Errorf("arguments = %s, want %s", r.Message.ToolCalls[0].Arguments, tt.args)
			}
		})
	}
}

func TestErrorClasses(t *testing.T) {
	tests := []struct {
		err       error
		transient bool
		after     time.Duration
	}{
		{&llm.APIError{Backend: "b", StatusCode: 429, RetryAfter: 3 * time.Second, Err: llm.ErrRateLimited}, true, 3 * time.Second},
		{&llm.APIError{Backend: "b", StatusCode: 503, Err: llm.ErrOverloaded}, true, 0},
		{&llm.APIError{Backend: "b", StatusCode: 500, Err: llm.ErrServer}, true, 0},
		{fmt.Errorf("wrapped: %w", &llm.APIError{Backend: "b", Err: llm.ErrConnection}), true, 0},
		{&llm.APIError{Backend: "b", Err: llm.ErrTimeout}, true, 0},
		{&llm.APIError{Backend: "b", StatusCode: 400, Err: llm.ErrBadRequest}, false, 0},
		{&llm.APIError{Backend: "b", StatusCode: 400, Err: llm.ErrContextLength}, false, 0},
		{&llm.APIError{Backend: "b", StatusCode: 401, Err: llm.ErrAuth}, false, 0},
		{context.Canceled, false, 0},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), false, 0},
		{errors.New("something else"), false, 0},
		{nil, false, 0},
	}
	for _, tt := range tests {
		if got := llm.IsTransient(tt.err); got != tt.transient {
			t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.transient)
		}
		if got := llm.RetryAfter(tt.err); got != tt.after {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.err, got, tt.after)
		}
	}
}

func TestAPIErrorMessage(t *testing.T) {
	tests := []struct {
		err  *llm.APIError
		want string
	}{
		{&llm.APIError{Backend: "openai", StatusCode: 429, Message: "slow down", Err: llm.ErrRateLimited}, "openai: HTTP 429: slow down"},
		{&llm.APIError{Backend: "sim", Err: llm.ErrOverloaded}, "sim: llm: backend overloaded"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestUsage(t *testing.T) {
	a := llm.Usage{PromptTokens: 10, CompletionTokens: 2, CachedTokens: 4}
	b := llm.Usage{PromptTokens: 5, CompletionTokens: 1}
	if got, want := a.Add(b), (llm.Usage{PromptTokens: 15, CompletionTokens: 3, CachedTokens: 4}); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	if got := a.Total(); got != 12 {
		t.Errorf("Total() = %d, want 12", got)
	}
}

func ExampleAccumulator() {
	var acc llm.Accumulator
	for _, ev := range []llm.Event{
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, ID: "c1", Name: "read_file"}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, Arguments: `{"path":`}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, Arguments: `"main.go"}`}},
	} {
		acc.Add(ev)
	}
	r := acc.Response()
	fmt.Println(r.FinishReason, r.Message.ToolCalls[0].Name, string(r.Message.ToolCalls[0].Arguments))
	// Output: tool_calls read_file {"path":"main.go"}
}

func TestSecretRedacts(t *testing.T) {
	s := llm.Secret("sk-live-abcdef")
	var logged strings.Builder
	logger := slog.New(slog.NewJSONHandler(&logged, nil))
	logger.Info("x", "key", s)
	b, _ := json.Marshal(struct{ Key llm.Secret }{s})
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %s %+v %#v", s, s, s, s), logged.String(), string(b), fmt.Sprint(struct{ K llm.Secret }{s})} {
		if strings.Contains(out, "abcdef") {
			t.Errorf("secret leaked in %q", out)
		}
	}
	if string(s) != "sk-live-abcdef" {
		t.Errorf("string(s) = %q, want the credential", string(s))
	}
}

// TestToolCallJSON checks that arguments survive a JSON round trip, valid
// ones compacted and malformed ones byte for byte (a state holding them
// must still save).
func TestToolCallJSON(t *testing.T) {
	for _, args := range []string{`{"path":"a.go"}`, `{"path": "a.go", "n": [1, 2]}`, `{"path":"a.g`, `not json`, `{}`, ``, `null`, `"x"`} {
		in := []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(args)}}
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("Marshal(args %q) = %v", args, err)
		}
		var out []llm.ToolCall
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("Unmarshal(%s) = %v", data, err)
		}
		want := args // empty stays empty, not null
		switch {
		case json.Valid([]byte(args)):
			var b bytes.Buffer
			json.Compact(&b, []byte(args))
			want = b.String()
		}
		if len(out) != 1 || out[0].ID != "c1" || out[0].Name != "read_file" || string(out[0].Arguments) != want {
			t.Errorf("round trip of args %q through %s = %+v, want the same call with arguments %q", args, data, out, want)
		}
		if valid := json.Valid([]byte(args)) || args == ""; valid != !strings.Contains(string(data), "arguments_text") {
			t.Errorf("args %q (valid %v) written as %s", args, valid, data)
		}
	}
}

func FuzzToolCallJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":`, `[]`, `null`, "\xff", `"\u00e9"`} {
		f.Add(s)
	}
	f.Add("")
	f.Fuzz(func(t *testing.T, args string) {
		data, err := json.Marshal(llm.ToolCall{ID: "i", Name: "n", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("Marshal(%q) = %v", args, err)
		}
		var out llm.ToolCall
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("Unmarshal(%s) = %v", data, err)
		}
		got := string(out.Arguments)
		if args == "" {
			if got != "" {
				t.Fatalf("empty args came back as %q", got)
			}
			return
		}
		if json.Valid([]byte(args)) {
			// Valid JSON is embedded; encoding/json compacts and
			// HTML-escapes it: the same value comes back.
			var a, b any
			if json.Unmarshal([]byte(args), &a) != nil || json.Unmarshal(out.Arguments, &b) != nil || !cmp.Equal(a, b) {
				t.Fatalf("valid args %q came back as %q", args, got)
			}
			return
		}
		// encoding/json writes each invalid UTF-8 byte as U+FFFD.
		var want strings.Builder
		for _, r := range args {
			want.WriteRune(r)
		}
		if want.String() != got {
			t.Fatalf("malformed args %q came back as %q", args, got)
		}
	})
}

// TestAccumulatorToolCall checks ToolCall against Response: positions in
// order of first appearance whatever the stream's indexes, "{}" for empty
// arguments, nothing for an index never seen, and an EventToolCallDone
// that changes nothing.
func TestAccumulatorToolCall(t *testing.T) {
	var acc llm.Accumulator
	for _, ev := range []llm.Event{
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 5, ID: "a", Name: "x", Arguments: `{"k":`}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 2, ID: "b", Name: "y"}},
		{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: 2}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 5, Arguments: `1}`}},
		{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: 5}},
	} {
		if err := acc.Add(ev); err != nil {
			t.Fatalf("Add(%+v) = %v", ev, err)
		}
	}
	tests := []struct {
		index   int
		wantPos int
		want    llm.ToolCall
		wantOK  bool
	}{
		{index: 5, wantPos: 0, want: llm.ToolCall{ID: "a", Name: "x", Arguments: json.RawMessage(`{"k":1}`)}, wantOK: true},
		{index: 2, wantPos: 1, want: llm.ToolCall{ID: "b", Name: "y", Arguments: json.RawMessage(`{}`)}, wantOK: true},
		{index: 3},
	}
	resp := acc.Response()
	for _, tt := range tests {
		pos, got, ok := acc.ToolCall(tt.index)
		if ok != tt.wantOK || pos != tt.wantPos || !cmp.Equal(got, tt.want) {
			t.Errorf("ToolCall(%d) = %d, %+v, %v; want %d, %+v, %v", tt.index, pos, got, ok, tt.wantPos, tt.want, tt.wantOK)
		}
		if ok && !cmp.Equal(resp.Message.ToolCalls[pos], got) {
			t.Errorf("ToolCall(%d) = %+v, but Response has %+v at %d", tt.index, got, resp.Message.ToolCalls[pos], pos)
		}
	}
	if len(resp.Message.ToolCalls) != 2 || resp.FinishReason != llm.FinishToolCalls {
		t.Errorf("Response = %+v, want two calls and finish tool_calls", resp)
	}
}
