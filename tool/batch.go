package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"
)

// Result is one call's outcome inside a batch: the content returned to the
// model, or the error that call failed with.
type Result struct {
	// Content is the call's result; ignored when Err is set.
	Content string
	// Err is the call's failure, reported to that caller only, as a
	// [*CallError]; wrap [ErrFatal] to end the caller's agent.
	Err error
}

// Batcher is a Tool whose calls can run together, such as a keyed lookup
// that answers many keys with one query. The [Pool] groups the calls to it
// that arrive within [Policy.BatchWindow] (or until [Policy.BatchMax] calls)
// into one CallBatch, and gives each caller its own [Result]; it never calls
// the Tool's Call method.
//
// CallBatch receives canonical JSON objects, distinct (identical calls are
// coalesced first) unless the tool's policy sets [Policy.NoCoalesce]; it
// must not modify them. It returns exactly len(args) results, in order: a
// different number fails every call of the batch. It should return promptly
// once ctx is done. Implementations must be safe for concurrent use: batches
// may run concurrently.
type Batcher interface {
	Tool
	CallBatch(ctx context.Context, args []json.RawMessage) []Result
}

// BatchFunc returns a Batcher with the given spec whose CallBatch runs fn and
// whose Call runs fn on a one-call batch. It panics if fn is nil, which is a
// programming error. The returned Batcher is safe for concurrent use if fn
// is.
func BatchFunc(spec Spec, fn func(ctx context.Context, args []json.RawMessage) []Result) Batcher {
	if fn == nil {
		panic("tool: BatchFunc called with a nil function")
	}
	return &batchFunc{spec: spec, fn: fn}
}

// batchFunc is the Batcher returned by BatchFunc.
type batchFunc struct {
	spec Spec
	fn   func(ctx context.Context, args []json.RawMessage) []Result
}

func (b *batchFunc) Spec() Spec { return b.spec }

func (b *batchFunc) Call(ctx context.Context, args json.RawMessage) (string, error) {
	res := b.fn(ctx, []json.RawMessage{args})
	if len(res) != 1 {
		return "", fmt.Errorf("tool %s: batch function returned %d results for 1 call", b.spec.Name, len(res))
	}
	return res[0].Content, res[0].Err
}

func (b *batchFunc) CallBatch(ctx context.Context, args []json.RawMessage) []Result {
	return b.fn(ctx, args)
}

// batch is the calls to a Batcher that execute together. It is open (the
// tool's entry.open) until its window ends, it is full or every caller has
// left; then it is sealed and, unless every caller left, executed once.
type batch struct {
	items  []batchItem // guarded by Pool.mu; nil once sealed
	live   int         // items whose flight still has callers; guarded by Pool.mu
	sealed bool        // no call joins any more; guarded by Pool.mu
	timer  *time.Timer // ends the window; nil until the first call stays open
	// run executes the sealed batch's items under the batch's context.
	run func(items []batchItem)
	// cancel cancels the batch's context: when every caller has left, or
	// once the execution ends.
	cancel context.CancelCauseFunc
}

// batchItem is one distinct call in a batch.
type batchItem struct {
	key string  // the pool key: name, NUL, canonical arguments
	f   *flight // the callers waiting for this call
}

// joinLocked adds f, a new flight for key, to e's open batch, opening one if
// there is none. It returns the function that executes the batch if f
// filled it, and nil otherwise; the caller runs it in a new goroutine after
// unlocking. p.mu must be held.
func (p *Pool) joinLocked(ctx context.Context, e *entry, key string, f *flight) func() {
	b := e.open
	if b == nil {
		// Like a flight, the batch keeps the values of the ctx of the call
		// that opened it but not its cancellation.
		execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		b = &batch{cancel: cancel}
		b.run = func(items []batchItem) { p.runBatch(execCtx, e, b, items) }
		e.open = b
	}
	f.batch = b
	b.items = append(b.items, batchItem{key: key, f: f})
	b.live++
	if b.live >= e.limits.batchMax {
		items := p.sealLocked(e, b)
		return func() { b.run(items) }
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(e.limits.window, func() {
			p.mu.Lock()
			if b.sealed { // filled, or abandoned, meanwhile
				p.mu.Unlock()
				return
			}
			items := p.sealLocked(e, b)
			p.mu.Unlock()
			b.run(items)
		})
	}
	return nil
}

// sealLocked closes b to new calls and returns the items that still have
// callers, counting the execution they are about to get. p.mu must be held
// and b must have callers.
func (p *Pool) sealLocked(e *entry, b *batch) []batchItem {
	b.sealed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	if e.open == b {
		e.open = nil
	}
	items := make([]batchItem, 0, b.live)
	for _, it := range b.items {
		if it.f.waiters > 0 {
			items = append(items, it)
		}
	}
	b.items = nil
	e.executed.Add(1)
	e.batches.Add(1)
	return items
}

// leaveLocked is called when the last caller of f, an item of b, has left.
// If b is still open and has no callers left, it is dropped unexecuted;
// the function returned, to call after unlocking, cancels the batch's
// context when its execution has no callers left. p.mu must be held.
func (p *Pool) leaveLocked(e *entry, b *batch) func() {
	b.live--
	if b.live > 0 {
		return nil
	}
	if !b.sealed {
		b.sealed = true
		b.timer.Stop()
		b.items = nil
		if e.open == b {
			e.open = nil
		}
	}
	return func() { b.cancel(errAbandoned) }
}

// runBatch executes the items of a sealed batch as one execution of e's
// Batcher and settles each item's flight with its own result. It owns
// ctx's cancellation.
func (p *Pool) runBatch(ctx context.Context, e *entry, b *batch, items []batchItem) {
	defer b.cancel(context.Canceled)
	p.runLimited(ctx, e, execution{items: items}, func(ctx context.Context) {
		args := make([]json.RawMessage, len(items))
		for i, it := range items {
			args[i] = json.RawMessage(it.key[len(e.spec.Name)+1:])
		}
		results, err := p.executeBatch(ctx, e, args)
		switch {
		case err != nil:
			p.settleAll(e, items, &CallError{Tool: e.spec.Name, Err: err})
		case len(results) != len(items):
			p.settleAll(e, items, &CallError{Tool: e.spec.Name,
				Err: fmt.Errorf("CallBatch returned %d results for %d calls", len(results), len(items))})
		default:
			timedOut := context.Cause(ctx) == e.limits.timeoutErr
			for i, r := range results {
				switch {
				case r.Err != nil && timedOut:
					p.settle(e, items[i].key, items[i].f, "", &CallError{Tool: e.spec.Name, Err: e.limits.timeoutErr})
				case r.Err != nil:
					p.settle(e, items[i].key, items[i].f, "", &CallError{Tool: e.spec.Name, Err: r.Err})
				default:
					p.settle(e, items[i].key, items[i].f, truncate(r.Content, p.cfg.MaxResultBytes), nil)
				}
			}
		}
	})
}

// executeBatch calls the Batcher, turning a panic into a *PanicError.
func (p *Pool) executeBatch(ctx context.Context, e *entry, args []json.RawMessage) (results []Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			results, err = nil, &PanicError{Tool: e.spec.Name, Value: v, Stack: debug.Stack()}
		}
	}()
	return e.batcher.CallBatch(ctx, args), nil
}

// settleAll settles every item with err.
func (p *Pool) settleAll(e *entry, items []batchItem, err error) {
	for _, it := range items {
		p.settle(e, it.key, it.f, "", err)
	}
}
