package llm_test

import (
	"bytes"
	"errors"
	"iter"
	"runtime"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// goroutineHeader returns the "goroutine N" header of the calling
// goroutine's stack trace.
func goroutineHeader() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	head, _, _ := bytes.Cut(buf, []byte(" ["))
	return string(head)
}

// TestOnOwnStack: the events and the error come through in order, the
// sequence runs on another goroutine than the loop's, and breaking out of
// the loop stops the sequence, whose deferred cleanup has run when the
// loop is left.
func TestOnOwnStack(t *testing.T) {
	boom := errors.New("boom")
	var seqOn string
	cleaned := false
	seq := iter.Seq2[llm.Event, error](func(yield func(llm.Event, error) bool) {
		defer func() { cleaned = true }()
		seqOn = goroutineHeader()
		for i, ty := range []llm.EventType{llm.EventText, llm.EventToolCall, llm.EventDone} {
			if !yield(llm.Event{Type: ty, Text: string(rune('a' + i))}, nil) {
				return
			}
		}
		yield(llm.Event{}, boom)
	})

	var got []string
	var gotErr error
	for ev, err := range llm.OnOwnStack(seq) {
		if err != nil {
			gotErr = err
			continue
		}
		got = append(got, ev.Text)
	}
	if strings.Join(got, "") != "abc" || !errors.Is(gotErr, boom) || !cleaned {
		t.Errorf("events %q, error %v, cleaned %v; want a b c, boom, true", got, gotErr, cleaned)
	}
	if loopOn := goroutineHeader(); seqOn == "" || seqOn == loopOn {
		t.Errorf("the sequence ran on %q, the loop on %q: want another goroutine", seqOn, loopOn)
	}

	cleaned = false
	n := 0
	for range llm.OnOwnStack(seq) {
		n++
		break
	}
	if n != 1 || !cleaned {
		t.Errorf("after a break: %d events, cleaned %v; want 1, true", n, cleaned)
	}
}
