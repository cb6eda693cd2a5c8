// Package spend caps what a run spends on model calls: a job's
// limits.max_cost. A [Cap] holds the dollars spent and the dollars
// reserved by the calls in flight; [Cap.Model] wraps a model so that each
// of its calls first reserves its worst-case cost (the prompt's estimated
// tokens at the input price plus the request's max_tokens at the output
// price) and settles with the answer's real usage. No call starts while
// spent plus reserved plus its own reservation would pass the limit: it
// waits for the calls in flight to settle, and once even the spent alone
// leaves no room for it, that call and every call after it is refused
// with an error wrapping [ErrCapReached] and job.ErrStopped: the agent
// stops as a gracefully stopped one does, its completed turns kept for a
// resume, and the calls in flight finish.
package spend

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"sync"
	"time"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// ErrCapReached is wrapped by the error of a model call refused because
// the run's spend cap was reached. The error wraps job.ErrStopped too, so
// the engine stops the agent as a canceled one (nothing checkpointed for
// its unfinished turn) and its input stays pending.
var ErrCapReached = errors.New("spend cap reached")

// Cap is the spend cap of one run, shared by every model [Cap.Model]
// wraps. It is safe for concurrent use: each call takes its lock twice,
// to reserve and to settle.
type Cap struct {
	limit  float64 // dollars
	ledger Ledger  // set by Share: the spend kept where other processes share it

	mu       sync.Mutex
	spent    float64 // dollars settled, the prior spend included
	reserved float64 // dollars reserved by the calls in flight
	refused  int64   // calls refused
	reached  bool    // a call was refused: every later call is
	// settled, when not nil, is closed by the next settle: calls waiting
	// for room wait on it.
	settled chan struct{}
}

// New returns a cap of limit dollars, which must be a finite number > 0.
func New(limit float64) (*Cap, error) {
	if !(limit > 0) || math.IsInf(limit, 0) {
		return nil, fmt.Errorf("spend cap must be a finite number of dollars > 0, got %v", limit)
	}
	return &Cap{limit: limit}, nil
}

// Limit returns the cap in dollars.
func (c *Cap) Limit() float64 { return c.limit }

// AddSpent counts dollars spent before the run (the usage of the results
// and turns a resumed run restores) against the cap. It does not refuse
// anything by itself: the next call finds the cap reached if it is.
func (c *Cap) AddSpent(dollars float64) {
	c.mu.Lock()
	c.spent += dollars
	c.mu.Unlock()
}

// Spent returns the dollars spent so far, the prior spend included.
func (c *Cap) Spent() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent
}

// Reached reports whether a call was refused: the run stopped at the cap.
func (c *Cap) Reached() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reached
}

// Refused returns the number of calls refused.
func (c *Cap) Refused() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Verdict is a [Ledger]'s answer to a reservation.
type Verdict int

// The verdicts of [Ledger.Reserve].
const (
	// Reserved: the dollars are reserved.
	Reserved Verdict = iota
	// Wait: they fit once calls in flight settle; ask again.
	Wait
	// Refused: they do not fit even then; the cap is reached, for every
	// process that shares the ledger.
	Refused
)

// Ledger keeps a cap's spent and reserved dollars where several processes
// share them (package queue's SpendLedger keeps them in Redis for a run's
// workers), so that together they stop at one cap. Its operations are
// atomic: concurrent reservations never together pass the limit.
type Ledger interface {
	// Reserve reserves dollars when spent + reserved + dollars ≤ limit
	// (Reserved); else it answers Wait while spent + dollars ≤ limit and
	// nothing was refused, and otherwise marks the cap reached (Refused).
	// spent is the dollars spent over every process.
	Reserve(ctx context.Context, limit, dollars float64) (v Verdict, spent float64, err error)
	// Settle ends a reservation of reserved dollars with its real cost.
	Settle(ctx context.Context, reserved, cost float64) error
}

// ledgerPoll is how often a call waiting for room in a shared ledger asks
// it again.
const ledgerPoll = 50 * time.Millisecond

// Share keeps c's spend in l, shared with the other processes of the run,
// instead of in this process. Call it before any call reserves.
// AddSpent still counts locally only (each process restores its own
// prior spend; a shared run keeps its spend in l across restarts).
func (c *Cap) Share(l Ledger) {
	c.mu.Lock()
	c.ledger = l
	c.mu.Unlock()
}

// reserve reserves dollars for a call, or returns the error refusing
// it. A call that would fit the cap were the calls in flight settled
// (their reservations are worst cases, mostly returned) waits for them;
// one that would not fit even then is refused, and so is every call after
// it. ctx ends the wait with its error.
func (c *Cap) reserve(ctx context.Context, dollars float64) error {
	if c.ledger != nil {
		return c.reserveShared(ctx, dollars)
	}
	for {
		c.mu.Lock()
		if !c.reached && c.spent+c.reserved+dollars <= c.limit {
			c.reserved += dollars
			c.mu.Unlock()
			return nil
		}
		if c.reached || c.spent+dollars > c.limit {
			c.reached = true
			c.refused++
			err := c.refusal(dollars)
			c.mu.Unlock()
			return err
		}
		// Calls in flight hold reservations (c.reserved > 0): one settles.
		if c.settled == nil {
			c.settled = make(chan struct{})
		}
		ch := c.settled
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// refusal returns the error of a call of dollars refused. c.mu is held.
func (c *Cap) refusal(dollars float64) error {
	return fmt.Errorf("%w: $%.4f spent of limits.max_cost $%.4f, and the next call may cost up to $%.4f: %w",
		ErrCapReached, c.spent, c.limit, dollars, job.ErrStopped)
}

// reserveShared is reserve through the shared ledger: it asks the ledger
// again every ledgerPoll while the answer is Wait. A ledger that cannot
// be asked fails the call with its error (not a refusal).
func (c *Cap) reserveShared(ctx context.Context, dollars float64) error {
	var timer *time.Timer
	for {
		v, spent, err := c.ledger.Reserve(ctx, c.limit, dollars)
		if err != nil {
			return fmt.Errorf("spend cap: %w", err)
		}
		c.mu.Lock()
		c.spent = spent
		switch v {
		case Reserved:
			c.reserved += dollars
			c.mu.Unlock()
			return nil
		case Refused:
			c.reached = true
			c.refused++
			err := c.refusal(dollars)
			c.mu.Unlock()
			return err
		}
		c.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(ledgerPoll)
			defer timer.Stop()
		} else {
			timer.Reset(ledgerPoll)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// settle ends a call's reservation of reserved dollars: cost is what it
// really cost. It wakes the calls waiting for room. With a shared ledger,
// a settlement the ledger refuses is dropped, not retried (it may have
// been applied): the reservation stays counted, so the cap errs on the
// side of spending less.
func (c *Cap) settle(reserved, cost float64) {
	if l := c.ledger; l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		_ = l.Settle(ctx, reserved, cost)
		cancel()
	}
	c.mu.Lock()
	c.reserved -= reserved
	if c.ledger == nil {
		c.spent += cost
	}
	if c.settled != nil {
		close(c.settled)
		c.settled = nil
	}
	c.mu.Unlock()
}

// settleTimeout bounds a settlement in a shared ledger.
const settleTimeout = 5 * time.Second

// Model returns m with every call reserving against c at price p (per
// million tokens). The model it returns keeps m's optional interfaces
// (llm.Streamer, llm.Capable, llm.QueueProber).
func (c *Cap) Model(m llm.Model, p llm.Price) llm.Model {
	b := &capped{m: m, c: c, p: p}
	s, streams := m.(llm.Streamer)
	cp, capable := m.(llm.Capable)
	q, probes := m.(llm.QueueProber)
	if !streams {
		switch {
		case capable && probes:
			return struct {
				*capped
				llm.Capable
				llm.QueueProber
			}{b, cp, q}
		case capable:
			return struct {
				*capped
				llm.Capable
			}{b, cp}
		case probes:
			return struct {
				*capped
				llm.QueueProber
			}{b, q}
		}
		return b
	}
	st := streaming{b, s}
	switch {
	case capable && probes:
		return struct {
			streaming
			llm.Capable
			llm.QueueProber
		}{st, cp, q}
	case capable:
		return struct {
			streaming
			llm.Capable
		}{st, cp}
	case probes:
		return struct {
			streaming
			llm.QueueProber
		}{st, q}
	}
	return st
}

// capped is a model whose calls reserve against a cap.
type capped struct {
	m llm.Model
	c *Cap
	p llm.Price
}

// worst returns the most req can cost at m's price ([Worst]).
func (m *capped) worst(req *llm.Request) float64 { return Worst(req, m.p) }

// Worst returns the most req can cost at p, as a wrapped model reserves
// it: its prompt's estimated tokens (about four bytes a token) at the
// input price and its max_tokens (job.DefaultMaxTokens when it sets none)
// at the output price.
func Worst(req *llm.Request, p llm.Price) float64 {
	out := req.MaxTokens
	if out <= 0 {
		out = job.DefaultMaxTokens
	}
	prompt := (req.TextBytes() + 3) / 4
	return (float64(prompt)*p.Input + float64(out)*p.Output) / 1e6
}

// Reserve reserves dollars for one call made outside [Cap.Model] (a
// gateway's, whose models are shared by callers under different caps), as
// a wrapped model's call does: it waits while the calls in flight may
// leave room, and returns an error wrapping [ErrCapReached] once the
// spent alone leaves none. Each Reserve that returned nil is followed by
// one [Cap.Settle] with the same dollars.
func (c *Cap) Reserve(ctx context.Context, dollars float64) error { return c.reserve(ctx, dollars) }

// Settle ends a reservation of reserved dollars made by [Cap.Reserve]:
// cost is what the call really cost (0 for a failed call).
func (c *Cap) Settle(reserved, cost float64) { c.settle(reserved, cost) }

// Reserved returns the dollars reserved by the calls in flight.
func (c *Cap) Reserved() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reserved
}

// Generate reserves the call's worst-case cost, calls the model and
// settles with the answer's usage; a failed call costs nothing.
func (m *capped) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	w := m.worst(req)
	if err := m.c.reserve(ctx, w); err != nil {
		return nil, err
	}
	resp, err := m.m.Generate(ctx, req)
	cost := 0.0
	if err == nil && resp != nil {
		cost = m.p.Cost(resp.Usage)
	}
	m.c.settle(w, cost)
	return resp, err
}

// streaming is a capped model that streams.
type streaming struct {
	*capped
	s llm.Streamer
}

// Stream reserves the call's worst-case cost and streams the model's
// answer, then settles with the usage it reported; a stream that began
// answering and reported no usage is counted at its reservation, one that
// failed before answering costs nothing.
func (m streaming) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		w := m.worst(req)
		if err := m.c.reserve(ctx, w); err != nil {
			yield(llm.Event{}, err)
			return
		}
		var (
			usage    llm.Usage
			hasUsage bool
			answered bool
		)
		defer func() {
			cost := 0.0
			switch {
			case hasUsage:
				cost = m.p.Cost(usage)
			case answered:
				cost = w
			}
			m.c.settle(w, cost)
		}()
		for ev, err := range m.s.Stream(ctx, req) {
			if err == nil {
				switch ev.Type {
				case llm.EventUsage:
					usage, hasUsage = ev.Usage, true
				case llm.EventText, llm.EventToolCall, llm.EventToolCallDone, llm.EventDone:
					answered = true
				}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}
