package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Gate admits the calls to one backend (an endpoint and a model). One
// Gate is shared by every job that calls that backend, so that they share
// its capacity: one adaptive limit, one pair of rate budgets, one view of
// the backend's queue and health, one prefix warm-up.
//
// [Gate.Acquire] waits, in this order, and holds no slot during any of the
// first four waits:
//
//  1. prefix warming: with [GateConfig.Warm], the first call goes alone and
//     every other waits until it has returned, so that the backend has
//     cached the shared prompt prefix before the others arrive;
//  2. the rate budgets ([GateConfig.RPM], [GateConfig.TPM], or limits the
//     backend reported), then the budget shared with other processes
//     ([GateConfig.Shared]);
//  3. the backpressure pause: while the backend's queue (read by
//     [GateConfig.Probe]) holds more than [GateConfig.MaxQueued] requests;
//  4. the outage pause: after a congestion answer asking for a wait
//     (Retry-After), and after connection failures, with a growing
//     back-off;
//  5. a slot of the [Scheduler], served by [Class], then by priority: the
//     limit adapts by [AIMD] unless [GateConfig.Fixed]; then, holding it,
//     the output-token budget while it is in debt ([GateConfig.OTPM], or
//     a limit the backend reported: see [Rate.TakeOutput]), and a slot of
//     the limit shared with other processes ([GateConfig.SharedSlots]).
//
// A call that got its slot while a pause began gives it back and waits
// again from step 3. Once [GateConfig.Stop] is closed, the waits of steps
// 1, 3 and 4, and those for the budget and slots shared with other
// processes (which may last as long as other processes keep them busy),
// end with [ErrStopped]; the local rate and slot waits end only with their
// context.
//
// A Gate is safe for concurrent use; create it with [NewGate].
type Gate struct {
	slots       *Scheduler
	aimd        *AIMD // nil when the limit is fixed or unlimited
	rate        *Rate
	share       Shared      // nil when the budgets are this process's alone
	slotsShared SharedSlots // nil when the concurrency limit is this process's alone
	out         *outage
	stop        <-chan struct{}
	log         *slog.Logger

	probe     ProbeFunc
	maxQueued int
	interval  time.Duration

	warm      bool
	warmFirst atomic.Bool
	warmDone  chan struct{} // closed when the first call returns

	mu     sync.Mutex    // protects resume
	resume chan struct{} // nil when admitting; closed on resume

	pauses    atomic.Int64 // backpressure pauses
	throttles atomic.Int64 // congestion answers

	runMu     sync.Mutex         // protects the fields below; held while the probe starts or stops
	runs      int                // runs registered
	stopProbe context.CancelFunc // ends the probe goroutine; nil when none runs
	probeDone chan struct{}      // closed when the probe goroutine has returned
}

// ErrStopped is returned by [Gate.Acquire] once [GateConfig.Stop] is
// closed, from the waits for prefix warming, backpressure and an outage
// pause.
var ErrStopped = errors.New("sched: stopped")

// Defaults of the backpressure of a [Gate].
const (
	// DefaultMaxQueued is the default of [GateConfig.MaxQueued].
	DefaultMaxQueued = 4
	// DefaultProbeInterval is the default of [GateConfig.ProbeInterval].
	DefaultProbeInterval = 200 * time.Millisecond
)

// DefaultSlowStartFrom caps the first limit of a gate's adaptive limit
// under [GateConfig.SlowStart]: the limit a self-hosted server, whose
// capacity slow start discovers, is first given.
const DefaultSlowStartFrom = 8

// ProbeFunc reads how many requests wait in the backend's queue. It must
// return when ctx is done.
type ProbeFunc func(ctx context.Context) (waiting int, err error)

// GateConfig configures a [Gate]. The zero value is valid: no limit, no
// pacing, no backpressure, no warming, no unavailability detection.
type GateConfig struct {
	// Limit is the most calls in flight at once. Defaults to Declared;
	// zero then means unlimited.
	Limit int
	// Declared is the concurrency the backend declares as its own
	// default: the limit when Limit is zero, and the first limit of the
	// adaptive limit when it is lower than Limit. Zero means none.
	Declared int
	// Initial is the first limit of the adaptive limit, at most Limit.
	// Defaults to Limit, or to Declared when that is lower, and with
	// SlowStart to at most DefaultSlowStartFrom. Ignored when Limit is
	// zero or Fixed is set.
	Initial int
	// Fixed keeps the limit at Limit: no AIMD.
	Fixed bool
	// SlowStart grows the adaptive limit by one per clean call until the
	// first congestion or the first long queue (see [AIMDConfig]), from
	// an initial limit of at most DefaultSlowStartFrom unless Initial is
	// set: a self-hosted server's capacity is discovered, not assumed.
	SlowStart bool

	// RPM is requests per minute. Zero means none, unless the backend
	// reports one ([Outcome.LimitRequests]).
	RPM int
	// TPM is tokens per minute. Zero means none, unless the backend
	// reports one ([Outcome.LimitTokens]).
	TPM int
	// OTPM is output tokens per minute, paced by debt ([Rate]). Zero
	// means none, unless the backend reports one
	// ([Outcome.LimitOutputTokens]).
	OTPM int

	// Shared is a budget shared with other processes that call the same
	// backend: every call also waits on it after the local budgets
	// above, which may then be zero (the shared budget is the account's
	// limit; local ones only smooth this process's share). With Shared
	// set the gate counts tokens ([Gate.CountsTokens]). Defaults to nil:
	// limits are this process's alone.
	Shared Shared
	// SharedSlots is a concurrency limit shared with other processes that
	// call the same backend: an admitted call also holds one of its slots,
	// taken after the local one, and its outcome feeds the shared limit's
	// adaptation. Defaults to nil: the concurrency limit is this process's
	// alone.
	SharedSlots SharedSlots

	// Policy orders the calls waiting for a slot (see [Policy]). Defaults
	// to PolicyTurns.
	Policy Policy

	// Warm sends the first call alone: the others wait until it has
	// returned (prefix warming).
	Warm bool

	// Probe reads the backend's queue every ProbeInterval while at least
	// one [Run] is registered, and pauses admission while more than
	// MaxQueued requests wait there. Nil means no backpressure.
	Probe ProbeFunc
	// MaxQueued is the queue length above which admission pauses.
	// Defaults to DefaultMaxQueued.
	MaxQueued int
	// ProbeInterval is how often Probe runs. Defaults to
	// DefaultProbeInterval.
	ProbeInterval time.Duration

	// PauseBase is the pause of admission after a first connection
	// failure; it doubles with each further one. Defaults to
	// DefaultPauseBase.
	PauseBase time.Duration
	// PauseMax caps the pauses after connection failures (never above
	// five seconds, so that a down backend is tried again that often) and
	// the waits a backend asks for. Defaults to DefaultPauseMax.
	PauseMax time.Duration
	// StartWindow is how long connection failures may last, from the
	// first, before a [Run] in which no call was answered declares the
	// backend unavailable. Zero means no detection; DefaultStartWindow is
	// the usual value.
	StartWindow time.Duration

	// Stop, once closed, ends the waits for warming and pauses with
	// ErrStopped: the owner is draining. Nil means never.
	Stop <-chan struct{}
	// Logger receives warnings (pauses, a failing probe). Defaults to a
	// logger that discards.
	Logger *slog.Logger
}

func (c *GateConfig) validate() error {
	switch {
	case c.Limit < 0 || c.Initial < 0 || c.Declared < 0:
		return fmt.Errorf("sched: negative gate limit (limit %d, initial %d, declared %d)", c.Limit, c.Initial, c.Declared)
	case c.Limit > 0 && c.Initial > c.Limit:
		return fmt.Errorf("sched: gate initial limit %d above its limit %d", c.Initial, c.Limit)
	case c.Limit == 0 && c.Initial > 0:
		return fmt.Errorf("sched: gate initial limit %d without a limit", c.Initial)
	case c.RPM < 0 || c.TPM < 0 || c.OTPM < 0:
		return fmt.Errorf("sched: negative gate rate limit (rpm %d, tpm %d, otpm %d)", c.RPM, c.TPM, c.OTPM)
	case c.MaxQueued < 0 || c.ProbeInterval < 0:
		return fmt.Errorf("sched: negative gate backpressure setting (max queued %d, interval %v)", c.MaxQueued, c.ProbeInterval)
	case c.PauseBase < 0 || c.PauseMax < 0 || c.StartWindow < 0:
		return fmt.Errorf("sched: negative gate pause setting (base %v, max %v, start window %v)", c.PauseBase, c.PauseMax, c.StartWindow)
	}
	return nil
}

func (c *GateConfig) withDefaults() {
	if c.Limit == 0 {
		c.Limit = c.Declared
	}
	if c.Initial == 0 {
		c.Initial = c.Limit
		if c.Declared > 0 {
			c.Initial = min(c.Declared, c.Limit)
		}
		if c.SlowStart && c.Limit > 0 {
			c.Initial = min(c.Initial, DefaultSlowStartFrom)
		}
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.PauseBase == 0 {
		c.PauseBase = DefaultPauseBase
	}
	if c.PauseMax == 0 {
		c.PauseMax = DefaultPauseMax
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Limits reports whether c limits calls at all: a concurrency limit (set
// or declared), a rate, prefix warming, a queue probe or a shared limit.
// A gate that limits nothing only watches for outages; its owner may let
// calls to a backend that declares nothing of itself bypass it.
func (c GateConfig) Limits() bool {
	return c.Limit > 0 || c.Declared > 0 || c.RPM > 0 || c.TPM > 0 || c.OTPM > 0 || c.Warm || c.Probe != nil ||
		c.Shared != nil || c.SharedSlots != nil
}

// NewGate returns a gate for cfg. It returns an error if a setting is
// negative or the initial limit is above the limit.
func NewGate(cfg GateConfig) (*Gate, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	g := &Gate{
		out:         newOutage(cfg.PauseBase, cfg.PauseMax, cfg.StartWindow),
		stop:        cfg.Stop,
		log:         cfg.Logger,
		probe:       cfg.Probe,
		maxQueued:   cfg.MaxQueued,
		interval:    cfg.ProbeInterval,
		warm:        cfg.Warm,
		warmDone:    make(chan struct{}),
		share:       cfg.Shared,
		slotsShared: cfg.SharedSlots,
	}
	var err error
	if g.slots, err = New(Config{Limit: cfg.Limit, Policy: cfg.Policy}); err != nil {
		return nil, err
	}
	if cfg.Limit > 0 && !cfg.Fixed {
		if g.aimd, err = NewAIMD(g.slots, AIMDConfig{Max: cfg.Limit, Initial: cfg.Initial, SlowStart: cfg.SlowStart}); err != nil {
			return nil, err
		}
	}
	if g.rate, err = NewRate(RateConfig{RPM: cfg.RPM, TPM: cfg.TPM, OTPM: cfg.OTPM}); err != nil {
		return nil, err
	}
	return g, nil
}

// Ticket is one admitted call. Its holder must call [Ticket.Release]
// exactly once; it may call [Ticket.Answering] before. A Ticket is not for
// concurrent use.
type Ticket struct {
	g         *Gate
	estimated int    // tokens taken from the token budget
	output    int    // output tokens taken from the output-token budget
	epoch     uint64 // the AIMD epoch the call was admitted in
	lease     string // the shared slot's lease; "" when none
	id, gen   uint64 // the call's id and outage generation, for outage.observe
	began     bool   // the backend began to answer
	warming   bool   // the call is the warm-up: others wait for its Release
}

// Acquire waits until a call may be sent to the backend (see [Gate] for
// the order of the waits), or ctx is done. class, flow and priority place
// the wait for a slot as in [Scheduler.AcquireFlow]. tokens is the call's estimated prompt
// size, taken from the token budget while one is in force
// ([Gate.CountsTokens]); otherwise it is ignored.
//
// On success the caller holds a Ticket and must release it. Otherwise it
// returns ctx's error, or [ErrStopped] once [GateConfig.Stop] is closed
// (from the waits for warming and pauses), or the error of the shared
// budget or slots ([Shared.Wait], [SharedSlots.Acquire]), and holds
// nothing.
func (g *Gate) Acquire(ctx context.Context, class Class, flow uint64, priority, tokens int) (*Ticket, error) {
	return g.AcquireOrder(ctx, class, flow, Order{Priority: priority}, tokens)
}

// AcquireOrder is Acquire with the wait for a slot placed by o, as in
// [Scheduler.AcquireOrder].
func (g *Gate) AcquireOrder(ctx context.Context, class Class, flow uint64, o Order, tokens int) (*Ticket, error) {
	t := &Ticket{g: g}
	if g.warm {
		if g.warmFirst.CompareAndSwap(false, true) {
			t.warming = true
		} else {
			select {
			case <-g.warmDone:
			case <-g.stop:
				return nil, ErrStopped
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if g.CountsTokens() {
		t.estimated = max(tokens, 0)
	}
	// A call that went past the pacing before any budget was in force
	// (none configured, none learnt yet) is paced once it holds its slot
	// if the backend's headers have set one meanwhile: else the calls
	// queued for slots before the first answer would all go out unpaced.
	unpaced := !g.rate.Paced()
	if err := g.rate.Wait(ctx, t.estimated); err != nil {
		t.endWarm()
		return nil, err
	}
	if g.share != nil {
		sctx, done := g.stoppable(ctx)
		err := g.share.Wait(sctx, t.estimated)
		done()
		if err != nil {
			t.endWarm()
			return nil, g.stoppedOr(err)
		}
	}
	for {
		if err := g.waitResume(ctx); err != nil {
			t.endWarm()
			return nil, err
		}
		if err := g.out.wait(ctx, g.stop); err != nil {
			t.endWarm()
			return nil, err
		}
		if err := g.slots.AcquireOrder(ctx, class, flow, o); err != nil {
			t.endWarm()
			return nil, err
		}
		if unpaced && g.rate.Paced() {
			unpaced = false
			if g.CountsTokens() {
				t.estimated = max(tokens, 0)
			}
			if err := g.rate.Wait(ctx, t.estimated); err != nil {
				g.slots.Release()
				t.endWarm()
				return nil, err
			}
		}
		// The output-token budget is paced by debt and settled before a
		// slot is freed (Release): waiting for it while holding the slot
		// lets a call freed by a Release go only once that call's output
		// is paid for.
		out, err := g.rate.TakeOutput(ctx)
		if err != nil {
			g.slots.Release()
			t.endWarm()
			return nil, err
		}
		t.output = out
		if g.slotsShared != nil {
			sctx, done := g.stoppable(ctx)
			lease, err := g.slotsShared.Acquire(sctx)
			done()
			if err != nil {
				g.slots.Release()
				g.rate.SpendOutput(t.output, 0)
				t.endWarm()
				return nil, g.stoppedOr(err)
			}
			t.lease = lease
		}
		if !g.paused() {
			var ok bool
			if t.id, t.gen, ok = g.out.admit(); ok {
				break
			}
		}
		// Paused while this call waited for its slots: give them back.
		g.rate.SpendOutput(t.output, 0)
		t.output = 0
		g.slots.Release()
		if g.slotsShared != nil {
			g.slotsShared.Release(ctx, t.lease, false, false)
		}
	}
	if g.aimd != nil {
		t.epoch = g.aimd.Epoch()
	}
	return t, nil
}

// stoppable returns ctx, also ended once Stop is closed, and the function
// that releases it (and the goroutine watching Stop, which it owns).
func (g *Gate) stoppable(ctx context.Context) (context.Context, func()) {
	if g.stop == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// stoppedOr returns ErrStopped once Stop is closed, else err.
func (g *Gate) stoppedOr(err error) error {
	select {
	case <-g.stop:
		return ErrStopped
	default:
		return err
	}
}

// CountsTokens reports whether a token budget is in force (configured,
// reported by the backend, or shared: [GateConfig.Shared]): only then do
// the tokens passed to [Gate.Acquire] matter, so callers can skip counting
// them otherwise.
func (g *Gate) CountsTokens() bool { return g.share != nil || g.rate.CountsTokens() }

// LastAnswer returns when a call last succeeded or began to get its
// answer ([Ticket.Answering]); zero if none has.
func (g *Gate) LastAnswer() time.Time { return g.out.lastServed() }

// Signal is what the backend's answer to a call says about the backend.
type Signal int

// The signals of an [Outcome].
const (
	// SignalOK: the call succeeded.
	SignalOK Signal = iota
	// SignalCongested: the backend rate-limited the call or refused it as
	// overloaded. It lowers the adaptive limit; with a RetryAfter it
	// pauses admission for that long.
	SignalCongested
	// SignalConnection: the backend could not be reached. Before the
	// backend began to answer ([Ticket.Answering]) it pauses admission with
	// a growing back-off, and the first of a series lowers the adaptive
	// limit; after, it counts as an answer.
	SignalConnection
	// SignalFailed: another answer of the backend (a server error, a bad
	// request): the backend is reachable, nothing more.
	SignalFailed
	// SignalAbandoned: the caller gave up, or the failure is not the
	// backend's: nothing is learnt.
	SignalAbandoned
)

// Outcome is how an admitted call ended, for [Ticket.Release].
type Outcome struct {
	// Err is the call's error, nil on success. It is only logged and named
	// in an unavailability error; Signal decides.
	Err error
	// Signal is what the answer says about the backend.
	Signal Signal
	// RetryAfter is the wait the backend asked for; used with
	// SignalCongested only.
	RetryAfter time.Duration
	// Tokens is the call's actual total tokens; it corrects the token
	// budget. Zero means unknown.
	Tokens int
	// OutputTokens is the call's actual output (completion) tokens; they
	// are taken from the output-token budget, if one is in force. Zero
	// means none or unknown.
	OutputTokens int
	// LimitRequests and LimitTokens are the per-minute limits the backend
	// reported (x-ratelimit-* headers); zero means none. Lower than the
	// configured ones, or with none configured, they are adopted.
	LimitRequests, LimitTokens int64
	// RemainingRequests and RemainingTokens are what the backend reported
	// is left of those limits (x-ratelimit-remaining-*); the pacing's
	// budgets are lowered to them ([Rate.Sync]). Each counts only with its
	// limit (LimitRequests, LimitTokens) reported: backends report the
	// three together.
	RemainingRequests, RemainingTokens int64
	// LimitOutputTokens is the per-minute output-token limit the backend
	// reported (anthropic-ratelimit-output-tokens-*), adopted like the
	// others; RemainingOutputTokens what it said is left of it, meaningful
	// only with the limit reported. Zero: none.
	LimitOutputTokens, RemainingOutputTokens int64
}

// Answering records that the backend began to answer the call (its first
// streamed event): the backend is reachable, though the answer may be slow
// to end. Calls after the first do nothing.
func (t *Ticket) Answering() {
	if !t.began {
		t.began = true
		t.g.out.answering()
	}
}

// Release frees the call's slot and feeds its outcome back: congestion
// and a first connection failure halve the limit, success grows it, a
// requested wait or a connection failure pauses admission, the real usage
// corrects the token budgets (the shared one too: [Shared.Correct]), and
// limits the backend reported are learnt.
// With prefix warming, releasing the first call lets the others go.
func (t *Ticket) Release(o Outcome) {
	g := t.g
	// The output-token budget first, before the slot and the warm-up are
	// freed: the calls they let go find this call's output spent and wait
	// for its refill.
	g.rate.Learn(0, 0, o.LimitOutputTokens)
	g.rate.SpendOutput(t.output, o.OutputTokens)
	if o.LimitOutputTokens > 0 {
		g.rate.Sync(-1, -1, o.RemainingOutputTokens)
	}
	congested := o.Signal == SignalCongested
	if congested {
		g.throttles.Add(1)
	}
	// The pause this outcome calls for begins before the slot is freed: a
	// call let go by the freed slot sees it and waits for its end.
	pause, firstConnFail := g.out.observe(t.id, t.gen, t.began, o)
	g.slots.Release()
	t.endWarm()
	if pause > 0 {
		g.log.LogAttrs(context.Background(), slog.LevelWarn, "backend cannot answer: admission paused for every call",
			slog.Duration("pause", pause), slog.Any("err", o.Err))
	}
	// A backend that went away lowers the limit once, not once per
	// probe while it is away: the pauses hold the callers meanwhile.
	congested = congested || firstConnFail
	if g.slotsShared != nil {
		g.slotsShared.Release(context.Background(), t.lease, o.Signal == SignalOK, congested)
	}
	if g.aimd != nil && (o.Signal == SignalOK || congested) {
		g.aimd.Observe(t.epoch, congested)
	}
	if o.Tokens > 0 {
		g.rate.Correct(t.estimated, o.Tokens)
		if g.share != nil {
			g.share.Correct(context.Background(), t.estimated, o.Tokens)
		}
	}
	g.rate.Learn(o.LimitRequests, o.LimitTokens, 0)
	reqLeft, tokLeft := int64(-1), int64(-1)
	if o.LimitRequests > 0 {
		reqLeft = o.RemainingRequests
	}
	if o.LimitTokens > 0 {
		tokLeft = o.RemainingTokens
	}
	g.rate.Sync(reqLeft, tokLeft, -1)
	if s, ok := g.share.(SharedSyncer); ok && (o.LimitRequests > 0 || o.LimitTokens > 0) {
		s.Sync(context.Background(), o.LimitRequests, reqLeft, o.LimitTokens, tokLeft)
	}
}

func (t *Ticket) endWarm() {
	if t.warming {
		t.warming = false
		close(t.g.warmDone)
	}
}

// BeginRun registers a run: until [Gate.EndRun], it learns of every answer
// and connection failure of the backend and may declare the backend
// unavailable ([Run.Down]). While at least one run is registered, the
// gate's probe ([GateConfig.Probe]) reads the backend's queue; ctx's
// values, not its cancellation, reach the probe started by the first run.
func (g *Gate) BeginRun(ctx context.Context) *Run {
	r := g.out.begin()
	if g.probe == nil {
		return r
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	g.runs++
	if g.runs == 1 {
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		g.stopProbe, g.probeDone = cancel, done
		go func() {
			defer close(done)
			g.probeLoop(pctx)
		}()
	}
	return r
}

// EndRun unregisters a run that [Gate.BeginRun] returned. Ending the last
// run stops the probe and waits for it, and resumes admission if the probe
// had paused it. Ending a run twice, or nil, does nothing.
func (g *Gate) EndRun(r *Run) {
	if r == nil || !g.out.end(r) || g.probe == nil {
		return
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	g.runs--
	if g.runs == 0 {
		g.stopProbe()
		<-g.probeDone
		g.stopProbe, g.probeDone = nil, nil
	}
}

// GaveUp is told that a caller of run r gave up after a failure, cause:
// if connection says it was a connection failure and no call was answered
// in the run, the run declares the backend unavailable at once (when
// detection is on, [GateConfig.StartWindow]). It returns the run's
// unavailability error, or nil.
func (g *Gate) GaveUp(r *Run, connection bool, cause error) error {
	return g.out.gaveUp(r, connection, cause)
}

// GateStats is a snapshot of a [Gate].
type GateStats struct {
	// Inflight is the calls holding a slot; Waiting those waiting for one.
	Inflight, Waiting int
	// Limit is the current limit; zero means unlimited.
	Limit int
	// LimitHistory is how the adaptive limit changed, from its start; nil
	// when the limit is fixed or unlimited.
	LimitHistory []Change
	// Throttles counts congestion answers ([SignalCongested]).
	Throttles int64
	// Pauses counts how often backpressure paused admission.
	Pauses int64
	// RPM, TPM and OTPM are the rate budgets in force (configured or
	// learnt); zero means none.
	RPM, TPM, OTPM int
}

// Stats returns a snapshot of the gate. The slice in it is the caller's.
func (g *Gate) Stats() GateStats {
	ss := g.slots.Stats()
	s := GateStats{Inflight: ss.Inflight, Waiting: ss.Waiting, Limit: ss.Limit,
		Throttles: g.throttles.Load(), Pauses: g.pauses.Load()}
	if g.aimd != nil {
		s.LimitHistory = g.aimd.History()
	}
	rl := g.rate.Limits()
	s.RPM, s.TPM, s.OTPM = rl.RPM, rl.TPM, rl.OTPM
	return s
}

func (g *Gate) paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resume != nil
}

// waitResume blocks while backpressure pauses admission.
func (g *Gate) waitResume(ctx context.Context) error {
	g.mu.Lock()
	ch := g.resume
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-g.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setPaused pauses or resumes admission.
func (g *Gate) setPaused(paused bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case paused && g.resume == nil:
		g.resume = make(chan struct{})
		g.pauses.Add(1)
	case !paused && g.resume != nil:
		close(g.resume)
		g.resume = nil
	}
}

// probeLoop reads the backend's queue every interval until ctx ends,
// pausing admission while more than maxQueued requests wait there. It
// resumes admission before returning.
func (g *Gate) probeLoop(ctx context.Context) {
	defer g.setPaused(false)
	t := time.NewTicker(g.interval)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		waiting, err := g.probe(ctx)
		if err != nil {
			if !warned && ctx.Err() == nil {
				g.log.LogAttrs(ctx, slog.LevelWarn, "queue probe failed; backpressure off until it answers", slog.Any("err", err))
				warned = true
			}
			g.setPaused(false)
			continue
		}
		full := waiting > g.maxQueued
		if full && g.aimd != nil {
			g.aimd.EndSlowStart()
		}
		g.setPaused(full)
	}
}
