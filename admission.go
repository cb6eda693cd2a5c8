package batchagent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// slowStartFrom is the first limit against a self-hosted server whose
// capacity the engine discovers by slow start.
const slowStartFrom = 8

// Defaults of [Backpressure].
const (
	DefaultMaxQueued     = 4
	DefaultProbeInterval = 200 * time.Millisecond
)

// RateLimit paces model calls to a hosted API's limits. Zero fields mean
// no limit of that kind; limits the backend reports in its responses
// (x-ratelimit-* headers) tighten them, or set them when unset.
type RateLimit struct {
	// RPM is requests per minute.
	RPM int
	// TPM is tokens per minute, estimated before each call with CountTokens
	// and corrected with the usage the call reports.
	TPM int
	// CountTokens estimates a request's prompt tokens. Nil means about
	// four bytes a token. It is called only while a token budget is in
	// force (TPM, or one learnt from the backend's headers).
	CountTokens func(*llm.Request) int
}

// Backpressure holds admission back while a self-hosted server's queue is
// long, so the server is fed at capacity instead of flooded. It applies
// when the Model is an llm.QueueProber that declares the probe.
type Backpressure struct {
	// Disabled turns the probe off.
	Disabled bool
	// MaxQueued pauses admission while the server reports more waiting
	// requests than this. Defaults to DefaultMaxQueued.
	MaxQueued int
	// Interval is how often the server's queue is read. Defaults to
	// DefaultProbeInterval.
	Interval time.Duration
}

// admission is the engine's agent.Gate: a priority slot pool whose limit
// AIMD adapts, paced by request and token budgets, paused while the
// backend's queue is long, and, with prefix warming, closed to all but the
// first call until that call returns.
type admission struct {
	slots *sched.Scheduler
	aimd  *sched.AIMD // nil when the limit is fixed or unlimited
	rate  *sched.Rate
	out   *outage         // global pauses and the dead-backend check
	stop  <-chan struct{} // closed when the engine drains; nil: never
	count func(*llm.Request) int
	log   *slog.Logger

	warm      bool
	warmFirst atomic.Bool
	warmDone  chan struct{} // closed when the first call returns

	mu      sync.Mutex    // protects resume
	resume  chan struct{} // nil when admitting; closed on resume
	pauses  atomic.Int64
	throttl atomic.Int64 // rate-limit and overload errors seen
}

// capabilities returns what m declares, and whether it declares anything
// (a hosted or self-hosted backend, not an in-process model).
func capabilities(m llm.Model) (llm.Capabilities, bool) {
	if c, ok := m.(llm.Capable); ok {
		return c.Capabilities(), true
	}
	return llm.Capabilities{}, false
}

// newAdmission builds j's admission: declared is the backend's default
// concurrency (0: none), probed whether its queue is probed.
func newAdmission(j Job, declared int, probed bool, log *slog.Logger) (*admission, error) {
	a := &admission{log: log, out: newOutage(j), count: j.RateLimit.CountTokens, warm: j.WarmPrefix, warmDone: make(chan struct{})}
	if a.count == nil {
		a.count = estimateTokens
	}
	limit := j.MaxInflight
	initial := limit
	if declared > 0 {
		if limit == 0 {
			limit = declared
		}
		initial = min(declared, limit)
	}
	// A self-hosted server with a queue probe has a capacity to discover:
	// start low and slow-start up to it, the probe ending the growth once
	// its queue builds.
	if probed {
		initial = min(initial, slowStartFrom)
	}
	var err error
	if a.slots, err = sched.New(sched.Config{Limit: limit}); err != nil {
		return nil, err
	}
	if limit > 0 && !j.FixedInflight {
		if a.aimd, err = sched.NewAIMD(a.slots, sched.AIMDConfig{Max: limit, Initial: max(initial, 1), SlowStart: probed}); err != nil {
			return nil, err
		}
	}
	if a.rate, err = sched.NewRate(sched.RateConfig{RPM: j.RateLimit.RPM, TPM: j.RateLimit.TPM}); err != nil {
		return nil, err
	}
	return a, nil
}

// estimateTokens counts about four bytes a token over the request's text.
func estimateTokens(req *llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return (n + 3) / 4
}

// permit is one admitted call.
type permit struct {
	a         *admission
	estimated int
	epoch     uint64 // the AIMD epoch the call was admitted in
	id, gen   uint64 // the call's id and outage generation, for outage.observe
	began     bool   // the backend began to answer: the first event came
	warming   bool
}

// Acquire waits, in order, for prefix warming, the backend's queue, the
// rate budgets, a global pause (after Retry-After answers and connection
// failures) and a slot; none of these waits holds a slot. Once the engine
// drains, the waits for prefix warming, the backend's queue and a pause
// end with agent.ErrStopped.
func (a *admission) Acquire(ctx context.Context, priority int, req *llm.Request) (agent.Permit, error) {
	p := &permit{a: a}
	if a.warm {
		if a.warmFirst.CompareAndSwap(false, true) {
			p.warming = true
		} else {
			select {
			case <-a.warmDone:
			case <-a.stop:
				return nil, agent.ErrStopped
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if a.rate.CountsTokens() { // counting re-reads the whole conversation
		p.estimated = a.count(req)
	}
	if err := a.rate.Wait(ctx, p.estimated); err != nil {
		p.endWarm()
		return nil, err
	}
	for {
		if err := a.waitResume(ctx); err != nil {
			p.endWarm()
			return nil, err
		}
		if err := a.out.wait(ctx, a.stop); err != nil {
			p.endWarm()
			return nil, err
		}
		if err := a.slots.Acquire(ctx, sched.Batch, priority); err != nil {
			p.endWarm()
			return nil, err
		}
		if !a.paused() {
			var ok bool
			if p.id, p.gen, ok = a.out.admit(); ok {
				break
			}
		}
		// Paused while this call waited for its slot: give it back.
		a.slots.Release()
	}
	if a.aimd != nil {
		p.epoch = a.aimd.Epoch()
	}
	return p, nil
}

// LastAnswer returns when a call last succeeded or began to get its
// answer (its first streamed event); zero if none has. Agents restart
// their outage clocks after it (agent.AnswerGate).
func (a *admission) LastAnswer() time.Time { return a.out.lastServed() }

// Answering records that the backend began to answer the call (its first
// streamed event, agent.AnswerPermit): the backend is reachable, though
// the answer may be slow to end.
func (p *permit) Answering() {
	if !p.began {
		p.began = true
		p.a.out.answering()
	}
}

func (a *admission) paused() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.resume != nil
}

func (p *permit) endWarm() {
	if p.warming {
		p.warming = false
		close(p.a.warmDone)
	}
}

// Release frees the slot and feeds the outcome back: congestion (a rate
// limit, an overload, a failed connection) halves the limit, success grows
// it, a requested wait or a failed connection pauses admission, the real
// usage corrects the token budget, and limits the backend reported are
// learnt.
func (p *permit) Release(resp *llm.Response, err error) {
	a := p.a
	a.slots.Release()
	p.endWarm()
	congested := errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrOverloaded)
	if congested {
		a.throttl.Add(1)
	}
	pause, firstConnFail := a.out.observe(p.id, p.gen, p.began, err)
	if pause > 0 {
		a.log.LogAttrs(context.Background(), slog.LevelWarn, "backend cannot answer: admission paused for every agent",
			slog.Duration("pause", pause), slog.Any("err", err))
	}
	// A backend that went away lowers the limit once, not once per
	// probe while it is away: the pauses hold the agents meanwhile.
	congested = congested || firstConnFail
	if a.aimd != nil && (err == nil || congested) {
		a.aimd.Observe(p.epoch, congested)
	}
	if resp != nil {
		a.rate.Correct(p.estimated, int(resp.Usage.Total()))
		if rl := resp.RateLimit; rl != nil {
			a.rate.Learn(rl.LimitRequests, rl.LimitTokens)
		}
	}
}

// waitResume blocks while admission is paused by backpressure.
func (a *admission) waitResume(ctx context.Context) error {
	a.mu.Lock()
	ch := a.resume
	a.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-a.stop:
		return agent.ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setPaused pauses or resumes admission.
func (a *admission) setPaused(paused bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case paused && a.resume == nil:
		a.resume = make(chan struct{})
		a.pauses.Add(1)
	case !paused && a.resume != nil:
		close(a.resume)
		a.resume = nil
	}
}

// probe reads the backend's queue every interval until ctx ends, pausing
// admission while more than maxQueued requests wait there. It resumes
// admission before returning.
func (a *admission) probe(ctx context.Context, p llm.QueueProber, bp Backpressure) {
	defer a.setPaused(false)
	t := time.NewTicker(bp.Interval)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, err := p.QueueDepth(ctx)
		if err != nil {
			if !warned && ctx.Err() == nil {
				a.log.LogAttrs(ctx, slog.LevelWarn, "queue probe failed; backpressure off until it answers", slog.Any("err", err))
				warned = true
			}
			a.setPaused(false)
			continue
		}
		full := d.Waiting > bp.MaxQueued
		if full && a.aimd != nil {
			a.aimd.EndSlowStart()
		}
		a.setPaused(full)
	}
}
