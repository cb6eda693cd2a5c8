package backendtest

import (
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// DoneOrder checks a stream, event by event, against the order that
// llm.EventToolCallDone promises: one per call, after the call began, and
// every call's before EventUsage and EventDone. The zero value is ready;
// the backends' fuzz targets feed it each event a stream yields.
type DoneOrder struct {
	began, done map[int]bool
}

// Add checks ev, the next event of the stream, and fails t at the first
// event out of order.
func (d *DoneOrder) Add(t testing.TB, ev llm.Event) {
	t.Helper()
	if d.began == nil {
		d.began, d.done = map[int]bool{}, map[int]bool{}
	}
	switch ev.Type {
	case llm.EventToolCall:
		d.began[ev.ToolCall.Index] = true
	case llm.EventToolCallDone:
		if i := ev.ToolCall.Index; !d.began[i] || d.done[i] {
			t.Fatalf("EventToolCallDone for call %d: began %v, done before %v", i, d.began[i], d.done[i])
		}
		d.done[ev.ToolCall.Index] = true
	case llm.EventUsage, llm.EventDone:
		for i := range d.began {
			if !d.done[i] {
				t.Fatalf("%v before the EventToolCallDone of call %d", ev.Type, i)
			}
		}
	}
}
