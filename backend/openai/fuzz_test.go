package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

// FuzzSSEStream serves arbitrary bytes as the SSE body of a 200 and checks
// that Stream neither panics nor hangs, and that it yields events ending
// with EventDone, or ends with an *llm.APIError and nothing after it.
func FuzzSSEStream(f *testing.F) {
	for _, b := range sseBodies(f) {
		f.Add(b)
	}
	f.Add(toolCallStream("read_file", `{"path": "a.go"}`, []int{3, 9}, "lookup", `{"id": 7}`, []int{1}))
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"))
	f.Add([]byte(": keep-alive\n\nevent: error\ndata: {\"error\":{\"code\":429}}\n\n"))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\r\n\r\ndata: [DONE]\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		m := offlineModel(t, "text/event-stream", body)
		var (
			events []llm.Event
			failed error
			order  backendtest.DoneOrder
		)
		for ev, err := range m.Stream(t.Context(), backendtest.Request(backendtest.ToolCall)) {
			if failed != nil {
				t.Fatalf("item (%+v, %v) after the error %v", ev, err, failed)
			}
			if err != nil {
				failed = err
				continue
			}
			if n := len(events); n > 0 && events[n-1].Type == llm.EventDone {
				t.Fatalf("event %+v after EventDone", ev)
			}
			if ev.Type < llm.EventText || ev.Type > llm.EventExtra || (ev.Type == llm.EventToolCall && ev.ToolCall.Index < 0) || (ev.Type == llm.EventExtra && ev.Extra.Empty()) {
				t.Fatalf("bad event %+v", ev)
			}
			events = append(events, ev)
			order.Add(t, ev)
		}
		if failed != nil {
			if ae, ok := errors.AsType[*llm.APIError](failed); !ok || ae.Backend != "openai" || ae.Err == nil {
				t.Fatalf("error %#v, want an *llm.APIError with a class", failed)
			}
			return
		}
		if len(events) == 0 || events[len(events)-1].Type != llm.EventDone {
			t.Fatalf("stream of %d events ended without EventDone or an error", len(events))
		}
		accumulate(events) // must not panic
	})
}

// FuzzToolArgs splits two tool calls' argument strings at arbitrary rune
// boundaries into chunks, interleaves them as servers may, and checks that
// Stream and llm.Accumulator reassemble both exactly.
func FuzzToolArgs(f *testing.F) {
	f.Add(`{"path": "a.go"}`, `{"id": 7}`, uint64(1), uint8(3))
	f.Add(`{"q":"h\u00e9llo \"w\u00f6rld\" \\ / \n"}`, `{}`, uint64(7), uint8(16))
	f.Add(`{"emoji":"😀👍🏽","cjk":"漢字"}`, `{"nested":{"a":[1,2,{"b":null}]}}`, uint64(42), uint8(9))
	f.Add(`not json at all {`, `{"unterminated": "`, uint64(3), uint8(2))
	f.Add(`{"x":1}`, `{"y":2}`, uint64(0), uint8(1))
	f.Fuzz(func(t *testing.T, a, b string, seed uint64, n uint8) {
		if a == "" || b == "" || !utf8.ValidString(a) || !utf8.ValidString(b) {
			t.Skip("arguments are non-empty valid UTF-8 on the wire")
		}
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		chunks := int(n)%16 + 1
		body := toolCallStream("read_file", a, cuts(r, a, chunks), "lookup", b, cuts(r, b, chunks))
		m := offlineModel(t, "text/event-stream", body)
		events, err := collect(m.Stream(t.Context(), backendtest.Request(backendtest.ToolCall)))
		if err != nil {
			t.Fatalf("Stream = %v\nbody:\n%s", err, body)
		}
		checkDoneArgs(t, events)
		got := accumulate(events).Message.ToolCalls
		want := []llm.ToolCall{{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(a)}, {ID: "call_2", Name: "lookup", Arguments: json.RawMessage(b)}}
		if len(got) != 2 {
			t.Fatalf("calls = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i].ID != want[i].ID || got[i].Name != want[i].Name || string(got[i].Arguments) != string(want[i].Arguments) {
				t.Errorf("call %d = %s %s %q, want %s %s %q", i, got[i].ID, got[i].Name, got[i].Arguments, want[i].ID, want[i].Name, want[i].Arguments)
			}
		}
	})
}

// cuts returns up to chunks-1 sorted cut points at rune boundaries of s.
func cuts(r *rand.Rand, s string, chunks int) []int {
	var bounds []int
	for i := range s {
		if i > 0 {
			bounds = append(bounds, i)
		}
	}
	var out []int
	for _, i := range bounds {
		if len(out) < chunks-1 && r.IntN(len(bounds)) < chunks {
			out = append(out, i)
		}
	}
	return out
}

// toolCallStream returns an SSE body in which two tool calls stream their
// arguments split at the given cut points, their chunks interleaved.
func toolCallStream(name1, args1 string, cuts1 []int, name2, args2 string, cuts2 []int) []byte {
	split := func(s string, at []int) []string {
		var parts []string
		prev := 0
		for _, c := range at {
			parts = append(parts, s[prev:c])
			prev = c
		}
		return append(parts, s[prev:])
	}
	chunk := func(delta string) string {
		return fmt.Sprintf(`data: {"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":null}]}`+"\n\n", delta)
	}
	call := func(index int, id, name, args string) string {
		fn := map[string]string{"arguments": args}
		if name != "" {
			fn["name"] = name
		}
		tc := map[string]any{"index": index, "function": fn}
		if id != "" {
			tc["id"], tc["type"] = id, "function"
		}
		b, _ := json.Marshal(map[string]any{"tool_calls": []any{tc}})
		return chunk(string(b))
	}
	p1, p2 := split(args1, cuts1), split(args2, cuts2)
	var sb strings.Builder
	sb.WriteString(chunk(`{"role":"assistant","content":null}`))
	sb.WriteString(call(0, "call_1", name1, ""))
	sb.WriteString(call(1, "call_2", name2, ""))
	for i := range max(len(p1), len(p2)) {
		if i < len(p1) {
			sb.WriteString(call(0, "", "", p1[i]))
		}
		if i < len(p2) {
			sb.WriteString(call(1, "", "", p2[i]))
		}
	}
	sb.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n")
	sb.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}` + "\n\ndata: [DONE]\n\n")
	return []byte(sb.String())
}

// checkDoneArgs checks that a call whose arguments are valid JSON had all
// of them, but for trailing whitespace, when its EventToolCallDone came:
// what a consumer executes early is what the whole answer calls.
func checkDoneArgs(t *testing.T, events []llm.Event) {
	t.Helper()
	args, atDone := map[int]string{}, map[int]string{}
	for _, ev := range events {
		switch ev.Type {
		case llm.EventToolCall:
			args[ev.ToolCall.Index] += ev.ToolCall.Arguments
		case llm.EventToolCallDone:
			atDone[ev.ToolCall.Index] = args[ev.ToolCall.Index]
		}
	}
	for i, a := range args {
		if json.Valid([]byte(a)) && atDone[i] != strings.TrimRight(a, " \t\r\n") && atDone[i] != a {
			t.Errorf("call %d had arguments %q at its EventToolCallDone, %q in the end", i, atDone[i], a)
		}
	}
}
