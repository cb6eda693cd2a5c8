package agent

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// early holds the tool executions of one turn that began while its answer
// streamed: a call starts as soon as the stream says its arguments are
// complete (llm.EventToolCallDone), through the same path as runTools.
// runTools then uses each one that matches a call of the whole answer and
// runs the rest. Executions of a model call that failed, or of an answer
// that is not run (cut off at the token cap), are cancelled and waited
// for before the agent goes on: their results are never used.
//
// An early serves one turn at a time (Run readies it for each turn with
// earlyTools, once the last turn's executions all ended) and is used from
// the agent's goroutine only; the executions' goroutines write only their
// own run, read after wg.Wait.
type early struct {
	// ctx is the agent's context, under which the turn's tools run as in
	// runTools (not the model call's, whose observer span ends with it).
	// It is kept here for the turn, and replaced for the next.
	ctx  context.Context
	turn int
	runs []*toolRun // by position among the answer's calls; nil: not started
	wg   sync.WaitGroup
	// first is when the first execution of the answer began; zero when
	// none has.
	first time.Time
}

// toolRun is one tool execution.
type toolRun struct {
	call   llm.ToolCall       // as executed, ID set
	cancel context.CancelFunc // ends the execution
	result llm.Message
	err    error
	end    time.Time // when it ended
}

// earlyTools returns the early executions of turn, run under ctx: prev,
// that of the agent's previous turn (whose executions all ended), made
// ready for turn, or a new one when prev is nil. It returns nil when the
// agent has no tools or its model does not stream, so that nothing can
// start early.
func (r *Runner) earlyTools(ctx context.Context, turn int, prev *early) *early {
	if r.cfg.Tools == nil || r.stream == nil {
		return nil
	}
	if prev == nil {
		return &early{ctx: ctx, turn: turn}
	}
	clear(prev.runs)
	prev.ctx, prev.turn, prev.runs, prev.first = ctx, turn, prev.runs[:0], time.Time{}
	return prev
}

// callID returns the ID of the call at pos of turn's answer: its own, or
// one made up from the turn and position when the backend sent none.
func callID(c llm.ToolCall, turn, pos int) string {
	if c.ID != "" {
		return c.ID
	}
	return "call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(pos)
}

// start begins executing c, the call at pos of the answer, unless a call
// at pos has begun already. A nil e starts nothing.
func (e *early) start(r *Runner, pos int, c llm.ToolCall) {
	if e == nil || pos < len(e.runs) && e.runs[pos] != nil {
		return
	}
	if pos >= len(e.runs) {
		e.runs = append(e.runs, make([]*toolRun, pos+1-len(e.runs))...)
	}
	c.ID = callID(c, e.turn, pos)
	ctx, cancel := context.WithCancel(e.ctx)
	run := &toolRun{call: c, cancel: cancel}
	e.runs[pos] = run
	if e.first.IsZero() {
		e.first = time.Now()
	}
	e.wg.Go(func() {
		defer cancel()
		run.result, run.err = r.execTool(ctx, e.turn, c)
		run.end = time.Now()
	})
}

// use returns the execution begun for c, the call at pos of the whole
// answer (ID set), or nil when none began. An execution begun with other
// arguments (a server sent more of the call after saying it was complete)
// is cancelled and not returned: its call runs again.
func (e *early) use(pos int, c llm.ToolCall) *toolRun {
	if e == nil || pos >= len(e.runs) || e.runs[pos] == nil {
		return nil
	}
	run := e.runs[pos]
	if !sameCall(run.call, c) {
		run.cancel()
		return nil
	}
	return run
}

// drop cancels the executions begun for calls at n and after, which the
// whole answer, of n calls, does not have.
func (e *early) drop(n int) {
	if e == nil {
		return
	}
	for _, run := range e.runs[min(n, len(e.runs)):] {
		if run != nil {
			run.cancel()
		}
	}
}

// sameCall reports whether a and b are the same call. Arguments that
// differ in trailing whitespace alone are the same: a stream says a call
// is complete when its JSON object closes, and whitespace may follow.
func sameCall(a, b llm.ToolCall) bool {
	const space = " \t\r\n"
	return a.ID == b.ID && a.Name == b.Name &&
		bytes.Equal(bytes.TrimRight(a.Arguments, space), bytes.TrimRight(b.Arguments, space))
}

// wait waits for every execution begun.
func (e *early) wait() {
	if e != nil {
		e.wg.Wait()
	}
}

// discard cancels every execution begun, waits for them and forgets them:
// the answer they were begun for does not count. A nil e does nothing.
func (e *early) discard() {
	if e == nil {
		return
	}
	for _, run := range e.runs {
		if run != nil {
			run.cancel()
		}
	}
	e.wg.Wait()
	clear(e.runs)
	e.runs = e.runs[:0]
	e.first = time.Time{}
}
