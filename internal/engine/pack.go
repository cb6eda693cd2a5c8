package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
	"github.com/batchagent/batchagent/schema"
)

// packLinger is how long a packer waits for more agents before it sends a
// pack that is not full: long enough for a run's or a game frame's
// agents to gather, short beside any model call.
const packLinger = 2 * time.Millisecond

// A packer groups the waiting agents of one job (a runner) into packed
// model calls (job.Pack). Agents wait in pending; a dispatch goroutine,
// started when the first agent arrives and ended when none waits, takes
// them in packs of up to size, sorted by input index, and starts a call
// goroutine per pack, owned by the pack: it ends with the call, which
// ends when every agent of the pack has stopped waiting.
type packer struct {
	e         *Engine
	g         *gate
	class     sched.Class
	flow      uint64
	model     llm.Model
	stream    llm.Streamer // model as a Streamer, or nil
	br        *gobreaker.TwoStepCircuitBreaker[struct{}]
	schema    *schema.Schema // nil: text answers
	check     func(json.RawMessage) error
	entry     json.RawMessage // the schema of an answer; nil: text
	system    string          // the packed calls' system message
	sysTokens int             // its estimated tokens
	base      llm.Request     // model name, token cap and sampling
	maxAgents int
	maxTokens int // job.Pack.MaxPromptTokens
	retries   int // calls a pack's agents may take part in before running alone

	mu      sync.Mutex
	pending []*packItem
	size    int           // the current pack size: adapts between 1 and maxAgents
	running bool          // a dispatch goroutine runs
	wake    chan struct{} // tells dispatch that an agent arrived; buffered 1
	seq     uint64        // arrival order, to sort agents of equal index

	cancelAdmit context.CancelFunc // ends dispatch's wait for a slot; nil when none

	autoOn    bool       // job.Pack.Auto: the packer chooses its size (packauto.go)
	auto      *autoState // what it measured; under mu
	verify    float64    // job.Pack.Verify
	minAgree  float64    // job.Pack.MinAgreement
	verifyAcc float64    // the share of a check accrued; under mu
}

// A packItem is one agent waiting for a packed answer.
type packItem struct {
	ctx      context.Context // the agent's: once it ends, the agent no longer waits
	index    int
	seq      uint64
	task     string
	tokens   int
	enqueued time.Time
	calls    int             // packed calls it took part in
	done     chan packAnswer // buffered 1: a call's answer never waits
	stop     func() bool     // stops the reaping of it once it leaves pending
	// resume starts the agent's work clock again once it leaves pending:
	// its wait there, for a pack to fill and get its slot, is a wait for
	// admission and does not count against its timeout.
	resume func()
	// phase is where the agent is counted in the engine's gauges: waiting
	// in pending, calling once its pack is taken, done once it stopped
	// waiting for the answer (set by answer, which may race a call).
	phase atomic.Int32
}

// The phases of a packItem.
const (
	phaseWaiting int32 = iota
	phaseCalling
	phaseDone
)

// move moves it from phase from to phase to, and its count in the
// engine's gauges with it; nothing when it is no longer in from.
func (p *packer) move(it *packItem, from, to int32) {
	if !it.phase.CompareAndSwap(from, to) {
		return
	}
	p.gauge(from, -1)
	p.gauge(to, 1)
}

// gauge adds d to the engine's gauge of phase.
func (p *packer) gauge(phase int32, d int64) {
	switch phase {
	case phaseWaiting:
		p.e.gauges.Waiting.Add(d)
	case phaseCalling:
		p.e.gauges.Calling.Add(d)
	}
}

// A packAnswer is what a packed call gives one agent: its output, or why
// it must run alone.
type packAnswer struct {
	out     json.RawMessage // nil: run alone
	alone   string          // why it runs alone, for the log
	packed  int             // the agents of the call
	timings job.Timings
	// check is the packed answer of an agent sampled for a check
	// (job.Pack.Verify): it runs alone and the two answers are compared.
	check json.RawMessage
	// measured: the agent runs alone because an automatic packer is
	// unpacked, which measures its call.
	measured bool
}

// estimateTokens is the packer's token estimate of text: 4 bytes a token.
func estimateTokens(s string) int { return (len(s) + 3) / 4 }

// newPacker returns the packer of a job whose agents pack, or nil when
// they do not.
func (e *Engine) newPacker(spec *job.Spec, cfg agent.Config, g *gate, flow uint64, br *gobreaker.TwoStepCircuitBreaker[struct{}]) *packer {
	pk := spec.Pack()
	if !pk.On() {
		return nil
	}
	d := spec.Def()
	p := &packer{
		e: e, g: g, class: sched.Class(d.Priority), flow: flow, model: d.Model, br: br,
		schema: spec.Schema(), check: d.Check, maxAgents: pk.MaxAgents, maxTokens: pk.MaxPromptTokens,
		size: pk.MaxAgents, wake: make(chan struct{}, 1),
		autoOn: pk.Auto, verify: pk.Verify, minAgree: pk.MinAgreement,
		base: llm.Request{Model: d.ModelName, MaxTokens: d.MaxTokens, Temperature: d.Temperature, TopP: d.TopP, Seed: d.Seed, Stop: d.Stop},
	}
	p.stream, _ = d.Model.(llm.Streamer)
	p.retries = 1 + max(cfg.MaxRetries, 0)
	entry := ""
	if p.schema != nil {
		var b bytes.Buffer
		_ = json.Compact(&b, p.schema.Raw()) // compiled: valid JSON
		p.entry = b.Bytes()
		entry = "Each answer is a JSON value that conforms to this JSON Schema:\n" + b.String()
	}
	p.system = pack.Instructions(entry)
	if d.System != "" {
		p.system = d.System + "\n\n" + p.system
	}
	p.sysTokens = estimateTokens(p.system)
	p.newAuto(d.Timeout)
	return p
}

// answer waits for the packed answer of agent i, whose rendered task is in
// st, and returns the number of agents of the call that answered it, with
// st holding the answer; 0 when the agent must run alone (its answer was
// missing or invalid, packing failed, an automatic packer found packing
// does not pay, or its packed answer is to be checked), with st
// unchanged, and then after, when not nil, to call with the agent's state
// and error once it ran alone. It returns ctx's cause when ctx ends first.
func (p *packer) answer(ctx context.Context, i int, st *agent.State) (packed int, after func(*agent.State, error), err error) {
	task := st.Messages[0].Content
	it := &packItem{ctx: ctx, index: i, task: task, tokens: estimateTokens(task), enqueued: time.Now(), done: make(chan packAnswer, 1)}
	if p.sysTokens+it.tokens > p.maxTokens {
		p.e.stats.packAlone.Add(1)
		return 0, nil, nil // too large to share a call
	}
	p.gauge(phaseWaiting, 1)
	p.add(it)
	defer func() { p.gauge(it.phase.Swap(phaseDone), -1) }()
	select {
	case a := <-it.done:
		if a.out == nil {
			p.e.stats.packAlone.Add(1)
			p.e.log.Debug("packed answer unusable: the agent runs alone", "agent", i, "why", a.alone)
			return 0, p.afterAlone(st, a.measured, a.check), nil
		}
		st.Messages = append(st.Messages, llm.Message{Role: llm.RoleAssistant, Content: string(a.out)})
		st.Output, st.Raw = a.out, string(a.out)
		if len(st.Spans) < job.MaxSpans {
			st.Spans = append(st.Spans, job.Span{Turn: st.Turns, Start: it.enqueued,
				Queue: a.timings.Queue, Inference: a.timings.Inference, TTFT: a.timings.TTFT})
		}
		st.Turns++
		st.Timings.Queue += a.timings.Queue
		st.Timings.Inference += a.timings.Inference
		if st.Timings.TTFT == 0 {
			st.Timings.TTFT = a.timings.TTFT
		}
		return a.packed, nil, nil
	case <-ctx.Done():
		select {
		case a := <-it.done:
			if a.measured {
				p.aloneDone(0, 0) // handed alone as it left: it no longer counts
			}
		default:
		}
		return 0, nil, context.Cause(ctx)
	}
}

// add queues it and makes sure a dispatch goroutine runs.
func (p *packer) add(it *packItem) {
	it.stop = context.AfterFunc(it.ctx, p.reap)
	it.resume = pauseWork(it.ctx)
	p.mu.Lock()
	p.seq++
	it.seq = p.seq
	p.pending = append(p.pending, it)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if start {
		go p.dispatch()
	}
}

// requeue queues the agents of a call again, for another pack.
func (p *packer) requeue(items []*packItem) {
	if len(items) == 0 {
		return
	}
	for _, it := range items {
		it.stop = context.AfterFunc(it.ctx, p.reap)
		it.resume = pauseWork(it.ctx)
		p.move(it, phaseCalling, phaseWaiting)
	}
	p.mu.Lock()
	p.pending = append(p.pending, items...)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	if start {
		go p.dispatch()
	}
}

// reap drops the agents that stopped waiting; once none waits, a wait for
// admission ends.
func (p *packer) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = slices.DeleteFunc(p.pending, func(it *packItem) bool { return it.ctx.Err() != nil })
	if len(p.pending) == 0 && p.cancelAdmit != nil {
		p.cancelAdmit()
	}
}

// dispatch sends packs while agents wait, then ends. A pack is taken only
// once the call has its slot, so that it holds every agent that came
// while the backend was busy, at the size the answers before it set.
func (p *packer) dispatch() {
	for p.due() {
		if p.unpackedNow() {
			if !p.release() {
				p.await()
			}
			continue
		}
		pm, brDone, why := p.admit()
		items := p.take()
		switch {
		case len(items) == 0:
			if pm != nil {
				pm.Release(nil, context.Canceled) // nothing to send: nothing learnt
			}
			if brDone != nil {
				brDone(errUncounted) // no call: nothing learnt
			}
		case why != "":
			for _, it := range items {
				it.done <- packAnswer{alone: why}
			}
		default:
			p.start(items, pm, brDone)
		}
	}
}

// unpackedNow reports whether an automatic packer hands its agents to
// run alone: its size came down to 1. A packer of a fixed size sends
// packs of one instead, as before.
func (p *packer) unpackedNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.autoOn && p.size <= 1
}

// release hands waiting agents to run alone and sends a probe pack when
// one is due (packauto.go); it reports whether it did either.
func (p *packer) release() bool {
	p.mu.Lock()
	alone, probe := p.unpacked()
	p.mu.Unlock()
	for _, it := range append(slices.Clone(alone), probe...) {
		it.stop()
		it.resume()
		p.move(it, phaseWaiting, phaseCalling)
	}
	for _, it := range alone {
		it.done <- packAnswer{alone: "packing does not pay on this backend now", measured: true}
	}
	if len(probe) > 0 {
		pm, brDone, why := p.admit()
		if why != "" {
			p.mu.Lock()
			p.auto.probing = false
			p.mu.Unlock()
			for _, it := range probe {
				it.done <- packAnswer{alone: why}
			}
		} else {
			p.start(probe, pm, brDone)
		}
	}
	return len(alone)+len(probe) > 0
}

// await waits, while unpacked agents wait and none may be handed on, for
// one to be answered (aloneDone wakes it), an agent to arrive, or a
// short while, to see agents that stopped waiting.
func (p *packer) await() {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.wake:
	}
}

// due waits until a pack is due: size agents wait, their tasks fill a
// prompt, or the oldest has waited packLinger. It returns false, and the
// dispatch goroutine must end, once no agent waits.
func (p *packer) due() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		p.pending = slices.DeleteFunc(p.pending, func(it *packItem) bool { return it.ctx.Err() != nil })
		if len(p.pending) == 0 {
			p.running = false
			return false
		}
		oldest := p.pending[0].enqueued
		for _, it := range p.pending[1:] {
			if it.enqueued.Before(oldest) {
				oldest = it.enqueued
			}
		}
		wait := packLinger - time.Since(oldest)
		if len(p.pending) >= p.size || wait <= 0 || p.full() {
			return true
		}
		p.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.wake:
			t.Stop()
		}
		p.mu.Lock()
	}
}

// full reports whether the waiting agents' tasks fill a pack's prompt.
func (p *packer) full() bool {
	n := p.sysTokens
	for _, it := range p.pending {
		if n += it.tokens; n > p.maxTokens {
			return true
		}
	}
	return false
}

// admit gets the next pack's way to the backend: through its circuit
// breaker, then a slot of its admission. why says why the pack cannot be
// sent (the breaker is open, the engine drains, admission failed); its
// agents then run alone. The wait for a slot ends once no agent waits.
func (p *packer) admit() (pm *permit, brDone func(error), why string) {
	if p.e.draining.Load() {
		return nil, nil, "the engine is draining"
	}
	if p.br != nil {
		var err error
		if brDone, err = p.br.Allow(); err != nil {
			return nil, nil, ErrBreakerOpen.Error()
		}
	}
	if !p.g.gated {
		return nil, brDone, ""
	}
	ctx, cancel := context.WithCancel(p.e.base)
	defer cancel()
	p.mu.Lock()
	p.cancelAdmit = cancel
	tokens := 0
	if p.g.g.CountsTokens() {
		items, _ := plan(slices.Clone(p.pending), p.size, p.maxTokens-p.sysTokens)
		tokens = p.g.count(p.request(items))
	}
	p.mu.Unlock()
	t, err := p.g.g.Acquire(ctx, p.class, p.flow, 0, tokens)
	err = admitErr(err)
	p.mu.Lock()
	p.cancelAdmit = nil
	p.mu.Unlock()
	if err == nil && p.e.draining.Load() {
		(&permit{t: t}).Release(nil, context.Canceled)
		err = sched.ErrStopped
	}
	if err != nil {
		if brDone != nil {
			brDone(errUncounted) // no call: nothing learnt
		}
		if errors.Is(err, sched.ErrStopped) {
			return nil, nil, "the engine is draining"
		}
		return nil, nil, fmt.Sprintf("admission: %v", err)
	}
	return &permit{t: t, unanswered: p.g.unanswered}, brDone, ""
}

// take takes the next pack from the waiting agents.
func (p *packer) take() []*packItem {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = slices.DeleteFunc(p.pending, func(it *packItem) bool { return it.ctx.Err() != nil })
	var items []*packItem
	items, p.pending = plan(p.pending, p.size, p.maxTokens-p.sysTokens)
	for _, it := range items {
		it.stop()
		it.resume()
		p.move(it, phaseWaiting, phaseCalling)
	}
	return items
}

// plan takes a pack from pending: the agents sorted by input index (then
// arrival), at most size of them, whose tasks' tokens fit in budget (at
// least one agent, when any waits). It returns the pack and the agents
// left, in order. The same waiting agents give the same pack whatever
// order they came in: a pack's ids (pack.ID, in its order) follow input
// indexes.
func plan(pending []*packItem, size, budget int) (items, rest []*packItem) {
	slices.SortFunc(pending, func(a, b *packItem) int {
		return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.seq, b.seq))
	})
	n, used := 0, 0
	for n < len(pending) && n < max(size, 1) {
		if n > 0 && used+pending[n].tokens > budget {
			break
		}
		used += pending[n].tokens
		n++
	}
	return slices.Clone(pending[:n]), slices.Delete(pending, 0, n)
}

// request returns the packed request of items.
func (p *packer) request(items []*packItem) *llm.Request {
	tasks := make([]string, len(items))
	for i, it := range items {
		tasks[i] = it.task
	}
	req := p.base
	req.Messages = []llm.Message{{Role: llm.RoleSystem, Content: p.system}, {Role: llm.RoleUser, Content: pack.Tasks(tasks)}}
	req.Output = &llm.OutputSpec{Name: pack.SchemaName, Schema: pack.Schema(p.entry, len(items))}
	return &req
}

// start makes the packed call of items, admitted with pm and brDone, in a
// goroutine owned by the pack: its context ends when every agent of the
// pack stopped waiting (or Shutdown gave up waiting), and it ends with
// the call.
func (p *packer) start(items []*packItem, pm *permit, brDone func(error)) {
	ctx, cancel := context.WithCancel(p.e.base)
	var waiting atomic.Int64
	waiting.Store(int64(len(items)))
	stops := make([]func() bool, len(items))
	for i, it := range items {
		it.calls++
		stops[i] = context.AfterFunc(it.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	req := p.request(items)
	go func() {
		defer func() {
			for _, stop := range stops {
				stop()
			}
			cancel()
		}()
		p.call(ctx, req, items, pm, brDone)
	}()
}

// call makes the packed call of items and hands each agent its answer as
// soon as its value closes in the streamed answer.
func (p *packer) call(ctx context.Context, req *llm.Request, items []*packItem, pm *permit, brDone func(error)) {
	start := time.Now()
	n := len(items)
	p.e.stats.modelCalls.Add(1)
	p.e.stats.packCalls.Add(1)
	answered := make([]bool, n)
	var (
		first          time.Time
		bad            int // entries invalid
		unknown, dupes int // entries of no agent, or of one already answered
		sc             pack.Scanner
		resp           *llm.Response
		err            error
	)
	ids := make(map[string]int, n)
	for i := range items {
		ids[pack.ID(i)] = i
	}
	emit := func(en pack.Entry) {
		i, ok := ids[en.ID]
		switch {
		case !ok:
			unknown++
			return
		case answered[i]:
			dupes++ // the first value stands: its agent has its answer
			return
		}
		answered[i] = true
		out, verr := p.validate(en)
		if verr != nil {
			bad++
			items[i].done <- packAnswer{alone: fmt.Sprintf("entry %s: %v", en.ID, verr)}
			return
		}
		p.mu.Lock()
		check := p.sample()
		p.mu.Unlock()
		if check {
			items[i].done <- packAnswer{alone: "its packed answer is checked against one alone", check: out}
			return
		}
		enq := items[i].enqueued
		t := job.Timings{Queue: start.Sub(enq), Inference: time.Since(start), TTFT: first.Sub(start)}
		items[i].done <- packAnswer{out: out, packed: n, timings: t}
	}
	feed := func(text string) {
		if first.IsZero() {
			first = time.Now()
			if pm != nil {
				pm.Answering()
			}
		}
		sc.Write(text, emit)
	}
	if p.stream != nil {
		acc := llm.Accumulator{Limit: llm.AnswerLimit(req.MaxTokens), MaxTokens: req.MaxTokens}
		serr := stream(ctx, p.stream, req, func(ev llm.Event, serr error) bool {
			if serr != nil {
				err = serr
				return false
			}
			if err = acc.Add(ev); err != nil {
				return false // an answer over the size cap: leaving closes the stream
			}
			if ev.Type == llm.EventText {
				feed(ev.Text)
			} else if first.IsZero() && ev.Type != llm.EventRateLimit {
				first = time.Now()
			}
			return true
		})
		if err == nil {
			err = serr
		}
		resp = acc.Response()
	} else {
		resp, err = generate(ctx, p.model, req)
		if err == nil {
			feed(resp.Message.Content)
		}
	}
	if resp != nil && err == nil {
		p.e.stats.addUsage(resp.Usage)
	}
	if brDone != nil {
		brDone(breakerOutcome(err))
	}
	truncated := err == nil && resp.FinishReason == llm.FinishLength
	var again []*packItem
	missing := 0
	for i, it := range items {
		if answered[i] {
			continue
		}
		missing++
		switch {
		case it.ctx.Err() != nil:
			// The agent stopped waiting; nothing to tell it.
		case (truncated || err != nil && llm.IsTransient(err)) && it.calls < p.retries && !p.e.draining.Load():
			again = append(again, it) // another pack may answer it
		case err != nil:
			it.done <- packAnswer{alone: fmt.Sprintf("packed call failed: %v", err)}
		case truncated:
			it.done <- packAnswer{alone: "packed answer cut off at the token cap"}
		case sc.Err() != nil:
			it.done <- packAnswer{alone: fmt.Sprintf("packed answer unreadable: %v", sc.Err())}
		default:
			it.done <- packAnswer{alone: fmt.Sprintf("entry %s missing from the packed answer", pack.ID(i))}
		}
	}
	p.adapt(n, truncated, bad+missing, err)
	if p.autoOn {
		p.mu.Lock()
		ttft := time.Duration(0)
		if !first.IsZero() {
			ttft = first.Sub(start)
		}
		p.packDone(n, time.Since(start), ttft, err != nil || truncated || 2*(bad+missing) > n)
		p.mu.Unlock()
	}
	// The slot goes back only now that the size is set: a pack formed the
	// moment it is free must be of the size this answer calls for.
	if pm != nil {
		pm.Release(resp, err)
	}
	if unknown+dupes > 0 {
		p.e.log.Debug("packed answer had stray entries", "unknown", unknown, "duplicates", dupes)
	}
	p.requeue(again)
}

// validate returns an entry's output: its value checked against the
// job's schema (text jobs: a JSON string) and Check, compacted.
func (p *packer) validate(en pack.Entry) (json.RawMessage, error) {
	if en.Err != nil {
		return nil, en.Err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, en.Value); err != nil {
		return nil, err
	}
	out := json.RawMessage(b.Bytes())
	if p.schema == nil {
		if len(out) == 0 || out[0] != '"' {
			return nil, errors.New("not a JSON string")
		}
	} else if err := p.schema.Validate(out); err != nil {
		return nil, err
	}
	if p.check != nil {
		if err := callCheck(p.check, out); err != nil {
			return nil, schema.CheckError(err)
		}
	}
	return out, nil
}

// adapt sets the pack size after a call of n agents: halved when the
// answer was cut off at the token cap or most entries were missing or
// invalid, grown by one after a clean answer.
func (p *packer) adapt(n int, truncated bool, bad int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil:
		// The backend's failure, not the pack's size: admission adapts.
	case truncated || 2*bad > n:
		p.setSize(max(1, min(p.size, n)/2), "packed answers came back cut or mostly unusable")
	case bad == 0 && n >= p.size && !p.autoOn:
		p.size = min(p.maxAgents, p.size+1)
	}
}
