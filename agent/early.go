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
}

// earlyDelay is how long a call whose arguments closed waits before it
// begins while its answer streams on. An answer that ends within it (the
// call was its last part, as it usually is) runs the call with the others
// in runTools, on the agent's goroutine, so that only a call with more of
// the answer still to come costs a goroutine of its own.
const earlyDelay = time.Millisecond

// toolRun is one tool execution.
type toolRun struct {
	call   llm.ToolCall       // as executed, ID set
	cancel context.CancelFunc // ends the execution
	// timer begins the execution once earlyDelay has passed; stopping it
	// first means the execution never begins.
	timer  *time.Timer
	result llm.Message
	err    error
	begin  time.Time // when it began
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
	prev.ctx, prev.turn, prev.runs = ctx, turn, prev.runs[:0]
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

// start begins executing c, the call at pos of the answer, after
// earlyDelay, unless a call at pos has begun already or c's tool is not
// idempotent: the stream may yet be cut and the model asked again, which
// would run such a call twice, so runTools runs it once the answer is
// whole. A nil e starts nothing.
func (e *early) start(r *Runner, pos int, c llm.ToolCall) {
	if e == nil || pos < len(e.runs) && e.runs[pos] != nil || !r.cfg.Tools.Idempotent(c.Name) {
		return
	}
	if pos >= len(e.runs) {
		e.runs = append(e.runs, make([]*toolRun, pos+1-len(e.runs))...)
	}
	c.ID = callID(c, e.turn, pos)
	ctx, cancel := context.WithCancel(e.ctx)
	run := &toolRun{call: c, cancel: cancel}
	e.runs[pos] = run
	turn := e.turn
	e.wg.Add(1)
	run.timer = time.AfterFunc(earlyDelay, func() {
		defer e.wg.Done()
		defer cancel()
		run.begin = time.Now()
		run.err = r.execTool(ctx, turn, &run.call, &run.result)
		run.end = time.Now()
	})
}

// halt cancels run; it reports whether its execution had begun (and so
// must be waited for).
func (e *early) halt(run *toolRun) (begun bool) {
	run.cancel()
	if run.timer.Stop() {
		e.wg.Done() // it never will
		return false
	}
	return true
}

// settle fixes, once the whole answer of calls is known, which early
// executions runTools uses: those that began for the same call. Those
// not yet begun never will (runTools runs their calls itself); those of a
// call the answer does not have, or has with other arguments (a server
// sent more of it after saying it was complete), are cancelled.
func (e *early) settle(calls []llm.ToolCall) {
	if e == nil {
		return
	}
	for pos, run := range e.runs {
		if run == nil {
			continue
		}
		switch {
		case run.timer.Stop():
			run.cancel()
			e.wg.Done() // it never will begin
			e.runs[pos] = nil
		case pos < len(calls) && sameCall(run.call, calls[pos]):
			// Begun for this very call: runTools waits for it.
		default:
			run.cancel() // wait still waits for it; its result is not used
			e.runs[pos] = nil
		}
	}
}

// use returns the execution begun for the call at pos of the whole
// answer, or nil when none began; call it after settle.
func (e *early) use(pos int) *toolRun {
	if e == nil || pos >= len(e.runs) {
		return nil
	}
	return e.runs[pos]
}

// begun returns when the first execution used began; zero when none did.
// Call it after wait.
func (e *early) begun() time.Time {
	var first time.Time
	if e == nil {
		return first
	}
	for _, run := range e.runs {
		if run != nil && (first.IsZero() || run.begin.Before(first)) {
			first = run.begin
		}
	}
	return first
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
			e.halt(run)
		}
	}
	e.wg.Wait()
	clear(e.runs)
	e.runs = e.runs[:0]
}
