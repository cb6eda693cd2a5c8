package llm_test

import (
	"fmt"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// BenchmarkAccumulatorManyToolCalls folds a hostile stream of many empty
// tool calls, each with its own index, as a server may send up to the answer
// limit: the cost per event must not grow with the calls held so far.
func BenchmarkAccumulatorManyToolCalls(b *testing.B) {
	const calls = 1 << 14
	b.ReportAllocs()
	for b.Loop() {
		acc := llm.Accumulator{Limit: llm.MaxAnswerBytes}
		for i := range calls {
			if err := acc.Add(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: i}}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// FuzzAccumulatorToolCalls folds tool-call fragments whose indices come from
// the fuzzer, in any order and repeated, and checks the calls against a
// plain model: one call per distinct index, in order of first appearance,
// the latest non-empty ID and name, the fragments' arguments concatenated.
func FuzzAccumulatorToolCalls(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 2})
	f.Add([]byte{5, 3, 5, 3, 200, 0})
	f.Fuzz(func(t *testing.T, idx []byte) {
		type call struct{ id, name, args string }
		var (
			acc   llm.Accumulator
			order []int
			want  = map[int]*call{}
		)
		for i, x := range idx {
			d := llm.ToolCallDelta{Index: int(x % 16), Arguments: string(rune('a' + i%26))}
			if i%3 == 0 {
				d.ID, d.Name = fmt.Sprint("id", i), fmt.Sprint("n", i)
			}
			if err := acc.Add(llm.Event{Type: llm.EventToolCall, ToolCall: d}); err != nil {
				t.Fatal(err)
			}
			c, ok := want[d.Index]
			if !ok {
				c = &call{}
				want[d.Index] = c
				order = append(order, d.Index)
			}
			if d.ID != "" {
				c.id, c.name = d.ID, d.Name
			}
			c.args += d.Arguments
		}
		got := acc.Response().Message.ToolCalls
		if len(got) != len(order) {
			t.Fatalf("%d calls, want %d", len(got), len(order))
		}
		for i, index := range order {
			w := want[index]
			if got[i].ID != w.id || got[i].Name != w.name || string(got[i].Arguments) != w.args {
				t.Errorf("call %d = %q %q %s, want %q %q %s", i, got[i].ID, got[i].Name, got[i].Arguments, w.id, w.name, w.args)
			}
		}
	})
}
