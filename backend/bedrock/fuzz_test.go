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
// with EventDone or with one bedrock *llm.APIError.
func FuzzEventStream(f *testing.F) {
	for _, s := range []backendtest.Scenario{backendtest.Plain, backendtest.ToolCall, backendtest.Structured, backendtest.StreamCut, backendtest.Malformed} {
		var body []byte
		for _, fr := range streamFrames(f, s) {
			body = append(body, fr...)
		}
		f.Add(body, s == backendtest.Structured)
	}
	f.Add([]byte{}, false)
	f.Add(append(messageStart(f), exceptionFrame(f, "throttlingException", "slow down")...), false)
	f.Add(append(messageStart(f), exceptionFrame(f, "somethingElseException", "?")...), true)
	f.Add(frame(f, "messageStop", `{"stopReason":"tool_use"}`), true)
	f.Fuzz(func(t *testing.T, body []byte, structured bool) {
		m := newModelWith(t, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: cannedClient(body)})
		req := backendtest.Request(backendtest.ToolCall)
		if structured {
			req = backendtest.Request(backendtest.Structured)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var (
			last  llm.EventType
			ended bool
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
		}
		if !ended {
			t.Fatalf("Stream() ended without EventDone or an error (last event %v)", last)
		}
	})
}
