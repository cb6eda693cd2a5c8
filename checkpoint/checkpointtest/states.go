package checkpointtest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// exactInput returns an input as a JSON reader with UseNumber yields it,
// holding what must come back exactly: integers above 2^53, a number out of
// float64's range, numbers whose text a float64 would change, nested
// objects and arrays, null, booleans, HTML characters, escapes and
// non-ASCII text.
func exactInput(idx int) job.Input {
	return job.Input{
		"id":      json.Number(fmt.Sprint(idx)),
		"big":     json.Number("123456789012345678901234567890"),
		"above53": json.Number("9007199254740993"),
		"huge":    json.Number("1e999"),
		"tiny":    json.Number("-1E-400"),
		"decimal": json.Number("0.10"),
		"neg":     json.Number("-0"),
		"text":    "<b>é & \"quoted\"</b>\n\t\u2028 ünïcödé 😀",
		"empty":   "",
		"null":    nil,
		"yes":     true,
		"no":      false,
		"list":    []any{json.Number("1"), "two", []any{}, map[string]any{"x": json.Number("3.000")}},
		"nested":  map[string]any{"a": map[string]any{"b": []any{nil, true}}, "": "empty key"},
		// Keys of the state itself, which must stay the input's.
		"messages": []any{map[string]any{"role": "user"}},
		"index":    json.Number("99"),
		"status":   "done",
		"slash":    `ends with a backslash \`,
	}
}

// runningState returns a state in progress with every field a running
// agent can have set: a conversation with tool calls (one with malformed
// arguments, as a model may write them, one with none), a tool error, every counter, a
// raised token cap, usage and timings.
func runningState(jobID string, idx int) agent.State {
	return agent.State{
		JobID:  jobID,
		Index:  idx,
		Input:  exactInput(idx),
		Status: agent.StatusRunning,
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: fmt.Sprintf("task of input %d", idx)},
			{Role: llm.RoleAssistant, Content: "Looking.", ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt","n":12345678901234567890}`)},
				{ID: "call_2", Name: "fetch", Arguments: json.RawMessage(`{"url": "http://x/?q=<&>"`)},
				{ID: "call_3", Name: "now"}, // no arguments: they come back empty, not null
			}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Name: "read_file", Content: "contents \u0000 of a.txt"},
			{Role: llm.RoleTool, ToolCallID: "call_2", Name: "fetch", Content: "malformed arguments", IsError: true},
			{Role: llm.RoleTool, ToolCallID: "call_3", Name: "now", Content: "12:00"},
			{Role: llm.RoleAssistant, Content: `{"answer": 1`},
			{Role: llm.RoleUser, Content: "Your answer was cut off; answer again, shorter."},
		},
		Turns:       2,
		ModelCalls:  4,
		Retries:     1,
		Corrections: 1,
		ToolCalls:   3,
		ToolErrors:  1,
		Repairs:     1,
		Truncations: 1,
		Compactions: 2,
		MaxTokens:   8192,
		Usage:       llm.Usage{PromptTokens: 1234, CompletionTokens: 567, CachedTokens: 890},
		Timings: agent.Timings{Queue: 1 * time.Millisecond, Inference: 2*time.Second + 1, Tools: 3 * time.Microsecond,
			Backoff: 4 * time.Millisecond, TTFT: 5 * time.Millisecond},
		Raw: `{"answer": 1`,
		// Times to the nanosecond, in zones of their own.
		Started: time.Date(2026, 11, 27, 9, 30, 0, 123456789, time.FixedZone("", 5*3600+30*60)),
		Spans: []job.Span{
			{Turn: 0, Start: time.Date(2026, 11, 27, 4, 0, 0, 1, time.UTC), Queue: time.Millisecond, Inference: time.Second, TTFT: time.Second - 1, Tools: 3 * time.Microsecond},
			{Turn: 1, Start: time.Date(2026, 11, 26, 23, 0, 1, 2, time.FixedZone("", -5*3600)), Inference: time.Second + 1, Backoff: 4 * time.Millisecond, Tier: 1},
		},
	}
}

// doneState returns a finished state with every field a done agent has:
// the output (with numbers a float64 would round), the raw answer, the
// counters, usage and timings with the run's Total.
func doneState(jobID string, idx int) agent.State {
	st := runningState(jobID, idx)
	st.Status = agent.StatusDone
	st.Messages = append(st.Messages, llm.Message{Role: llm.RoleAssistant, Content: `{"answer":"yes","n":12345678901234567890,"f":1e999}`})
	st.Turns, st.ModelCalls = 3, 5
	st.Usage.PromptTokens += 100
	st.Timings.Total = 7*time.Second + 3
	st.Output = json.RawMessage(`{"answer":"yes","n":12345678901234567890,"f":1e999,"html":"<&>"}`)
	st.Raw = "```json\n{\"answer\":\"yes\",\"n\":12345678901234567890,\"f\":1e999,\"html\":\"<&>\"}\n```"
	return st
}

// failedState returns a failed state with every failure field set: kind,
// message, step, turn, classes and the schema problems of a validation
// failure.
func failedState(jobID string, idx int) agent.State {
	st := runningState(jobID, idx)
	st.Status = agent.StatusFailed
	st.Failure = &job.Failure{Kind: "validation", Op: "validate", Turn: 2, Cause: []job.Link{
		{Message: `answer cut off: schema: 3 problems: $.n: got string, want integer; $: missing required property "answer"; path C:\`, Class: "truncated,validation"},
		{Message: `schema: 3 problems: $.n: got string, want integer; $: missing required property "answer"; path C:\`, Class: "validation"},
	}, Problems: []schema.Problem{
		{Path: "$.n", Message: "got string, want integer"},
		{Path: "$", Message: `missing required property "answer"`},
		{Path: `$["odd key"][0]`, Message: "value <&> not allowed"},
	}}
	st.Raw = `{"n":"12","note":"\\","messages":[{"role":"user"}],"x":"\"` // as if a member of the state
	st.Timings.Total = 9 * time.Second
	return st
}

// earlyFailedState returns a state that failed before its first turn (a
// template that could not be rendered): turn -1, no conversation.
func earlyFailedState(jobID string, idx int) agent.State {
	return agent.State{
		JobID:   jobID,
		Index:   idx,
		Input:   job.Input{"name": "x"},
		Status:  agent.StatusFailed,
		Failure: &job.Failure{Kind: "template", Op: "render", Turn: -1, Cause: []job.Link{{Message: `template: input has no field "id"`}}},
		Timings: agent.Timings{Total: time.Microsecond},
	}
}

// turnState returns the state of agent idx of jobID after turns turns: a
// pure function of its arguments, so that a loaded state can be checked to
// be one that was saved, whole.
func turnState(jobID string, idx, turns int) agent.State {
	st := agent.State{
		JobID:  jobID,
		Index:  idx,
		Input:  job.Input{"id": json.Number(fmt.Sprint(idx))},
		Status: agent.StatusRunning,
		Turns:  turns, ModelCalls: turns,
		Usage: llm.Usage{PromptTokens: int64(100 * turns), CompletionTokens: int64(turns)},
	}
	st.Messages = append(st.Messages, llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("task %d", idx)})
	for i := range turns {
		st.Messages = append(st.Messages, llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("turn %d of agent %d", i+1, idx)})
	}
	return st
}

// finalTurnState is turnState finished: done after turns turns.
func finalTurnState(jobID string, idx, turns int) agent.State {
	st := turnState(jobID, idx, turns)
	st.Status = agent.StatusDone
	st.Output = json.RawMessage(fmt.Sprintf(`{"agent":%d,"turns":%d}`, idx, turns))
	st.Timings.Total = time.Duration(turns) * time.Millisecond
	return st
}
