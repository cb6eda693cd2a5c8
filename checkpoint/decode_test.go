package checkpoint

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// checkDecodeFinal fails unless decodeFinal reads line as encoding/json
// does with the messages dropped, whenever encoding/json reads it.
func checkDecodeFinal(t *testing.T, line []byte) {
	t.Helper()
	var want agent.State
	if err := unmarshalState(line, &want); err != nil {
		var buf []byte
		decodeFinal(line, &buf) // must not panic; the messages are not validated
		return
	}
	var buf []byte
	got, err := decodeFinal(line, &buf)
	if err != nil {
		t.Fatalf("decodeFinal(%q) = %v; encoding/json reads it", line, err)
	}
	want.Messages = nil
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("decodeFinal(%q)\n got %+v\nwant %+v", line, got, want)
	}
}

// trickyState has message text that looks like JSON structure: quotes,
// escaped backslashes before quotes, brackets, a "messages" key.
func trickyState() agent.State {
	return agent.State{
		JobID: "j", Index: 4, Status: agent.StatusDone,
		Input: job.Input{"messages": map[string]any{"messages": []any{"x"}}, "q": `"]}`},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: `a \"quoted\" ], "messages":[ } \\`},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: `\\"`, Name: "f", Arguments: json.RawMessage(`{"messages":"]\\"}`)}}},
			{Role: llm.RoleTool, Content: `\\\\`, ToolCallID: `\\"`},
		},
		Turns: 2, Output: json.RawMessage(`{"messages":["x"]}`), Raw: `"messages":[]`,
		// After the messages: kept by the cut.
		Started: time.Date(2026, 11, 27, 12, 0, 0, 1, time.FixedZone("", 3600)),
		Spans:   []job.Span{{Turn: 0, Start: time.Unix(1798700000, 5).UTC(), Inference: 7, Tools: 3}, {Turn: 1, Tier: 2}},
	}
}

func TestDecodeFinal(t *testing.T) {
	for name, st := range map[string]agent.State{
		"tricky":      trickyState(),
		"no messages": {Index: 1, Status: agent.StatusFailed, Failure: &job.Failure{Cause: []job.Link{{Message: "x"}}}},
		"empty":       {Index: 2, Status: agent.StatusDone, Messages: []llm.Message{}},
	} {
		t.Run(name, func(t *testing.T) {
			line, err := appendState(nil, &st)
			if err != nil {
				t.Fatal(err)
			}
			checkDecodeFinal(t, line[:len(line)-1])
			var buf []byte
			got, err := decodeFinal(line[:len(line)-1], &buf)
			if err != nil || got.Messages != nil || got.Index != st.Index || string(got.Output) != string(st.Output) {
				t.Errorf("decodeFinal = index %d, output %s, messages %v, %v; want index %d, output %s, no messages",
					got.Index, got.Output, got.Messages, err, st.Index, st.Output)
			}
		})
	}
	// Lines the quick cut cannot take go to encoding/json.
	for _, line := range []string{
		`{"messages":[{"role":"user"}],"index":3}`,
		`{"index":3, "messages" : [ {"role":"user"} ] }`,
		`{"index":3,"messages":null}`,
		`{"index":3,"messages":"not a list"}`,
	} {
		checkDecodeFinal(t, []byte(line))
	}
	var buf []byte
	if st, err := decodeFinal([]byte(`{"index":3,"messages":[{"role":"user"}],"turns":"x"}`), &buf); err == nil {
		t.Errorf("decodeFinal(line with a bad turns) = %+v, want an error", st)
	}
}

// FuzzDecodeFinal compares decodeFinal with encoding/json on arbitrary
// lines, seeded with stored states.
func FuzzDecodeFinal(f *testing.F) {
	var full agent.State
	fill(f, reflect.ValueOf(&full).Elem(), "State")
	for _, st := range []agent.State{full, trickyState(), {Index: 9, Status: agent.StatusFailed}} {
		line, err := appendState(nil, &st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(line[:len(line)-1])
	}
	f.Add([]byte(`{"index":1,"messages":[{"content":"\\\\\"]"}],"turns":2}`))
	f.Add([]byte(`{"index":1,"messages":[],"messages":[]}`))
	// A failure as version 0 of the format wrote it, in six members.
	f.Add([]byte(`{"index":1,"status":"failed","err_kind":"validation","err_msg":"check: bad","err_op":"validate","err_turn":2,"err_class":"validation","problems":[{"path":"$.n","message":"got string"}],"messages":[{"role":"user"}],"turns":3}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodeFinal(t, line)
	})
}
