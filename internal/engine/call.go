package engine

import (
	"context"
	"errors"
	"iter"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// Call sends req to the backend m serves under name through that
// backend's admission in class, without an agent loop, and yields the
// answer's events as they come: streamed when m is an llm.Streamer, else
// built from its whole response. A failure ends the sequence with its
// error; nothing is retried. Stopping the iteration abandons the call and
// frees its slot. onAdmit, if not nil, is called once the call is
// admitted, before its request is sent. See batchagent.Engine.Call.
func (e *Engine) Call(ctx context.Context, m llm.Model, name string, class sched.Class, req *llm.Request, onAdmit func()) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if m == nil || req == nil {
			yield(llm.Event{}, errors.New("batchagent: call without a model or a request"))
			return
		}
		if !e.begin() {
			yield(llm.Event{}, ErrShutdown)
			return
		}
		defer e.work.Done()
		ctx, unbind := e.bind(ctx)
		defer unbind()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		g, err := e.gateFor(m, name, nil)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		if req.Model == "" {
			r := *req
			r.Model = name
			req = &r
		}
		var p *permit
		if g.gated {
			run := g.g.BeginRun(ctx) // keeps the backend's queue probe going
			defer g.g.EndRun(run)
			tokens := 0
			if g.g.CountsTokens() {
				tokens = g.count(req)
			}
			t, err := g.g.Acquire(ctx, class, e.callFlow(class), 0, tokens)
			err = admitErr(err)
			if errors.Is(err, sched.ErrStopped) {
				err = ErrShutdown
			}
			if err != nil {
				yield(llm.Event{}, err)
				return
			}
			p = &permit{t: t, unanswered: g.unanswered}
		}
		if onAdmit != nil {
			admitted(p, onAdmit)
		}
		resp, err, stopped := e.call(ctx, m, req, p, yield)
		if p != nil {
			if stopped && err == nil {
				err = context.Canceled // abandoned by the caller: nothing learnt
			}
			p.Release(resp, err)
		}
		if err != nil && !stopped {
			yield(llm.Event{}, err)
		}
	}
}

// admitted calls onAdmit, the caller's, for the call that holds p (nil:
// none); a panic in it goes on up to the caller, p released.
func admitted(p *permit, onAdmit func()) {
	done := false
	defer func() {
		if !done && p != nil {
			p.Release(nil, context.Canceled) // abandoned before it was sent: nothing learnt
		}
	}()
	onAdmit()
	done = true
}

// call makes the model call of Call and yields its events; it returns the
// answer, its error, and whether the caller stopped the iteration.
func (e *Engine) call(ctx context.Context, m llm.Model, req *llm.Request, p *permit, yield func(llm.Event, error) bool) (*llm.Response, error, bool) {
	if s, ok := m.(llm.Streamer); ok {
		var (
			acc     llm.Accumulator
			began   bool
			err     error
			stopped bool
			inYield bool // the caller's loop body runs: a panic there is the caller's own
		)
		serr := stream(ctx, s, req, func(ev llm.Event, eerr error) bool {
			if eerr != nil {
				err = eerr
				return false
			}
			if !began && p != nil {
				began = true
				p.Answering()
			}
			if err = acc.Add(ev); err != nil {
				return false
			}
			inYield = true
			more := yield(ev, nil)
			inYield = false
			if !more {
				stopped = true
				return false
			}
			return true
		})
		if pe, ok := errors.AsType[*job.PanicError](serr); ok && inYield {
			panic(pe.Value) // the caller's, not the model's: it goes on up
		}
		if err == nil {
			err = serr
		}
		return acc.Response(), err, stopped && err == nil
	}
	resp, err := generate(ctx, m, req)
	if err != nil {
		return nil, err, false
	}
	for ev := range responseEvents(resp) {
		if !yield(ev, nil) {
			return resp, nil, true
		}
	}
	return resp, nil, false
}

// responseEvents returns the events a stream of resp would have carried:
// its text, each tool call whole and done, its usage, and the end.
func responseEvents(resp *llm.Response) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		if resp.Extra != nil && !yield(llm.Event{Type: llm.EventExtra, Extra: resp.Extra}) {
			return
		}
		if resp.Message.Content != "" && !yield(llm.Event{Type: llm.EventText, Text: resp.Message.Content}) {
			return
		}
		for i, c := range resp.Message.ToolCalls {
			d := llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}
			if !yield(llm.Event{Type: llm.EventToolCall, ToolCall: d}) ||
				!yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}) {
				return
			}
		}
		if resp.RateLimit != nil && !yield(llm.Event{Type: llm.EventRateLimit, RateLimit: resp.RateLimit}) {
			return
		}
		if !yield(llm.Event{Type: llm.EventUsage, Usage: resp.Usage}) {
			return
		}
		yield(llm.Event{Type: llm.EventDone, FinishReason: resp.FinishReason})
	}
}

// callFlow returns the scheduling flow of Call's requests in class: all
// calls of a class are one flow, which takes turns with the runs.
func (e *Engine) callFlow(class sched.Class) uint64 {
	e.callFlowsOnce.Do(func() {
		for i := range e.callFlows {
			e.callFlows[i] = e.flows.Add(1)
		}
	})
	return e.callFlows[min(max(int(class), 0), len(e.callFlows)-1)]
}
