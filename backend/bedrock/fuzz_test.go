package bedrock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

// FuzzEventStream feeds arbitrary bytes to Stream as a ConverseStream
// response body: it must neither panic nor hang, and it must end either
// with EventDone or with one bedrock *llm.APIError. mode picks the request:
// tools (0), forced structured output (1), or structured output offered
// beside tools (2); the output tool's call never comes back as a tool call.
func FuzzEventStream(f *testing.F) {
	for _, s := range []backendtest.Scenario{backendtest.Plain, backendtest.ToolCall, backendtest.Structured, backendtest.StreamCut, backendtest.Malformed} {
		var body []byte
		for _, fr := range streamFrames(f, s) {
			body = append(body, fr...)
		}
		var mode byte
		if s == backendtest.Structured {
			mode = 1
		}
		f.Add(body, mode)
	}
	var mixed []byte
	for _, fr := range [][]byte{
		messageStart(f),
		toolStart(f, 0, "tooluse_1", "answer"), toolDelta(f, 0, `{"n":`), toolDelta(f, 0, `1}`), blockStop(f, 0),
		toolStart(f, 1, "tooluse_2", "lookup"), toolDelta(f, 1, `{"id":7}`), blockStop(f, 1),
		messageStop(f, "tool_use"), metadata(f),
	} {
		mixed = append(mixed, fr...)
	}
	f.Add(mixed, byte(2))
	// Usage before the call's block ends: EventUsage must still come after
	// the call's EventToolCallDone.
	var early []byte
	for _, fr := range [][]byte{
		messageStart(f), toolStart(f, 0, "tooluse_1", "lookup"), toolDelta(f, 0, `{"id":7}`),
		metadata(f), blockStop(f, 0), messageStop(f, "tool_use"),
	} {
		early = append(early, fr...)
	}
	f.Add(early, byte(0))
	// A call begun after messageStop, usage before both: the call ends at
	// the stream's end, and the usage after it.
	var late []byte
	for _, fr := range [][]byte{
		messageStart(f), metadata(f), messageStop(f, "tool_use"),
		toolStart(f, 0, "tooluse_1", "lookup"), toolDelta(f, 0, `{"id":7}`),
	} {
		late = append(late, fr...)
	}
	f.Add(late, byte(0))
	f.Add([]byte{}, byte(0))
	f.Add(append(messageStart(f), exceptionFrame(f, "throttlingException", "slow down")...), byte(0))
	f.Add(append(messageStart(f), exceptionFrame(f, "somethingElseException", "?")...), byte(1))
	f.Add(frame(f, "messageStop", `{"stopReason":"tool_use"}`), byte(1))
	f.Fuzz(func(t *testing.T, body []byte, mode byte) {
		m := newModelWith(t, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: cannedClient(body)})
		req := backendtest.Request(backendtest.ToolCall)
		switch mode % 3 {
		case 1:
			req = backendtest.Request(backendtest.Structured)
		case 2:
			req.Output = backendtest.OutputSpec
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var (
			last  llm.EventType
			ended bool
			acc   llm.Accumulator
			order backendtest.DoneOrder
		)
		for ev, err := range m.Stream(ctx, req) {
			if ended {
				t.Fatalf("Stream() yielded %+v, %v after its end", ev, err)
			}
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Stream() hung on %q", body)
				}
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Backend != "bedrock" || ae.Err == nil {
					t.Fatalf("Stream() error = %#v, want a classed bedrock *llm.APIError", err)
				}
				ended = true
				continue
			}
			last = ev.Type
			ended = ev.Type == llm.EventDone
			order.Add(t, ev)
			if err := acc.Add(ev); err != nil { // no Limit: never
				t.Fatalf("Accumulator.Add(%+v) = %v", ev, err)
			}
		}
		if !ended {
			t.Fatalf("Stream() ended without EventDone or an error (last event %v)", last)
		}
		if req.Output != nil {
			for _, c := range acc.Response().Message.ToolCalls {
				if c.Name == req.Output.Name {
					t.Fatalf("structured output came back as a tool call: %+v", c)
				}
			}
		}
	})
}
