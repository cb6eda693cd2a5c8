package llm_test

import (
	"fmt"

	"github.com/batchagent/batchagent/llm"
)

// A consumer of a stream can execute each tool call as soon as the stream
// says its arguments are complete, before the answer ends.
func ExampleAccumulator_ToolCall() {
	events := []llm.Event{
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, ID: "call_1", Name: "lookup"}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, Arguments: `{"id":`}},
		{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: 0, Arguments: `7}`}},
		{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: 0}},
		{Type: llm.EventText, Text: "Looking it up."},
		{Type: llm.EventDone, FinishReason: llm.FinishToolCalls},
	}
	var acc llm.Accumulator
	for _, ev := range events {
		if err := acc.Add(ev); err != nil {
			fmt.Println(err)
			return
		}
		if ev.Type == llm.EventToolCallDone {
			pos, c, _ := acc.ToolCall(ev.ToolCall.Index)
			fmt.Printf("call %d is complete: %s %s %s\n", pos, c.ID, c.Name, c.Arguments)
		}
	}
	resp := acc.Response()
	fmt.Println(resp.Message.Content, resp.FinishReason)
	// Output:
	// call 0 is complete: call_1 lookup {"id":7}
	// Looking it up. tool_calls
}
