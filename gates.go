package batchagent

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// Defaults of [Admission].
const (
	DefaultMaxQueued     = sched.DefaultMaxQueued
	DefaultProbeInterval = sched.DefaultProbeInterval
	// DefaultStartWindow is the default of [Admission.StartWindow].
	DefaultStartWindow = sched.DefaultStartWindow
)

// slowStartFrom is the first limit against a self-hosted server whose
// capacity the engine discovers by slow start.
const slowStartFrom = 8

// ErrBackendUnavailable ends a run whose backend never answered: no model
// call got an answer while the run was in progress, and connections to the
// backend failed for the start window ([Admission.StartWindow]), or an
// agent spent its outage budget on connection failures. The agents it
// stops get results of kind [KindCanceled] whose error wraps it
// (errors.Is), as do the inputs not started under [Engine.Run] ([Stream]
// yields nothing for those, as after a cancellation); nothing is
// checkpointed for them, so with a Checkpoint they stay pending for the
// next run. Its message names the last connection failure. The check
// applies to the calls the engine gates: every backend that declares its
// capabilities (all HTTP backends), or any with a limit set.
var ErrBackendUnavailable = sched.ErrUnavailable

// A gate is one backend's admission, shared by every job of the engine
// whose Spec names that backend (Model and model name): a sched.Gate fed
// with what the backend's answers say.
type gate struct {
	key   Backend
	order int // creation order, for Stats
	g     *sched.Gate
	gated bool // g is consulted for every model call
	count func(*llm.Request) int
}

// backendKey is the key of a comparable model's gate.
type backendKey Backend

// capabilities returns what m declares, and whether it declares anything
// (a hosted or self-hosted backend, not an in-process model).
func capabilities(m llm.Model) (llm.Capabilities, bool) {
	if c, ok := m.(llm.Capable); ok {
		return c.Capabilities(), true
	}
	return llm.Capabilities{}, false
}

// gateOf returns the gate of spec's backend, building it on first use.
func (e *Engine) gateOf(spec *Spec) (*gate, error) {
	m, name := spec.Model()
	var key any = backendKey{Model: m, Name: name}
	if !reflect.TypeOf(m).Comparable() {
		key = spec // an admission of its own
	}
	e.gatesMu.Lock()
	defer e.gatesMu.Unlock()
	if g, ok := e.gates[key]; ok {
		return g, nil
	}
	a := e.cfg.Admission
	if k, ok := key.(backendKey); ok {
		if b, ok := e.cfg.Backends[Backend(k)]; ok {
			a = b
		}
	}
	caps, hosted := capabilities(m)
	cfg := sched.GateConfig{
		Fixed:         a.FixedInflight,
		RPM:           a.RateLimit.RPM,
		TPM:           a.RateLimit.TPM,
		Warm:          a.WarmPrefix,
		MaxQueued:     a.Backpressure.MaxQueued,
		ProbeInterval: a.Backpressure.Interval,
		PauseBase:     a.PauseBackoff.Base,
		PauseMax:      a.PauseBackoff.Max,
		Stop:          e.drained,
		Logger:        e.log,
	}
	if !a.NoStartWindow {
		cfg.StartWindow = cmpOr(a.StartWindow, DefaultStartWindow)
	}
	if p, ok := m.(llm.QueueProber); ok && caps.QueueProbe && !a.Backpressure.Disabled {
		cfg.Probe = func(ctx context.Context) (int, error) {
			d, err := p.QueueDepth(ctx)
			return d.Waiting, err
		}
	}
	// The limit: the configured one, else the backend's declared default;
	// adaptive from the declared default when that is lower, and from
	// slowStartFrom against a probed server, whose capacity is found by
	// slow start.
	declared := caps.DefaultConcurrency
	cfg.Limit = a.MaxInflight
	initial := cfg.Limit
	if declared > 0 {
		if cfg.Limit == 0 {
			cfg.Limit = declared
		}
		initial = min(declared, cfg.Limit)
	}
	if cfg.Probe != nil {
		initial = min(initial, slowStartFrom)
		cfg.SlowStart = true
	}
	if cfg.Limit > 0 && !cfg.Fixed {
		cfg.Initial = max(initial, 1)
	}
	sg, err := sched.NewGate(cfg)
	if err != nil {
		return nil, err
	}
	g := &gate{key: Backend{Model: m, Name: name}, order: len(e.gates), g: sg, count: a.RateLimit.CountTokens}
	if g.count == nil {
		g.count = estimateTokens
	}
	g.gated = cfg.Limit > 0 || cfg.RPM > 0 || cfg.TPM > 0 || cfg.Warm || cfg.Probe != nil || hosted
	e.gates[key] = g
	return g, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
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

// classGate is the agent.Gate of one job's agents: the backend's gate, in
// the job's priority class, each call in the flow its context names.
type classGate struct {
	g     *gate
	class sched.Class
}

// flowKey is the context key of the scheduling flow of an agent's calls:
// each run is a flow, and so are each spec's Submits; the flows of a class
// take turns for the backend's slots.
type flowKey struct{}

// Acquire waits for the backend's gate. Once the engine drains, the waits
// for prefix warming and pauses end with agent.ErrStopped.
func (c *classGate) Acquire(ctx context.Context, priority int, req *llm.Request) (agent.Permit, error) {
	flow, _ := ctx.Value(flowKey{}).(uint64)
	tokens := 0
	if c.g.g.CountsTokens() { // counting re-reads the whole conversation
		tokens = c.g.count(req)
	}
	t, err := c.g.g.Acquire(ctx, c.class, flow, priority, tokens)
	if errors.Is(err, sched.ErrStopped) {
		return nil, agent.ErrStopped
	}
	if err != nil {
		return nil, err
	}
	return permit{t}, nil
}

// LastAnswer returns when a call last succeeded or began to get its
// answer; agents restart their outage clocks after it (agent.AnswerGate).
func (c *classGate) LastAnswer() time.Time { return c.g.g.LastAnswer() }

// permit is one admitted call.
type permit struct{ t *sched.Ticket }

// Answering records that the backend began to answer the call (its first
// streamed event, agent.AnswerPermit).
func (p permit) Answering() { p.t.Answering() }

// Release frees the slot and tells the gate what the answer says of the
// backend.
func (p permit) Release(resp *llm.Response, err error) {
	o := sched.Outcome{Err: err, Signal: signalOf(err)}
	if o.Signal == sched.SignalCongested {
		o.RetryAfter = llm.RetryAfter(err)
	}
	if resp != nil {
		o.Tokens = int(resp.Usage.Total())
		if rl := resp.RateLimit; rl != nil {
			o.LimitRequests, o.LimitTokens = rl.LimitRequests, rl.LimitTokens
		}
	}
	p.t.Release(o)
}

// signalOf maps a model call's error to what it says of the backend.
func signalOf(err error) sched.Signal {
	switch {
	case err == nil:
		return sched.SignalOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return sched.SignalAbandoned // the caller gave up: nothing learnt
	case errors.Is(err, llm.ErrRateLimited), errors.Is(err, llm.ErrOverloaded):
		return sched.SignalCongested
	}
	if _, ok := errors.AsType[*llm.APIError](err); !ok {
		return sched.SignalAbandoned // not the backend's answer (a stopped agent, a misuse)
	}
	if errors.Is(err, llm.ErrConnection) {
		return sched.SignalConnection
	}
	return sched.SignalFailed
}

// BackendStats is a snapshot of one backend's admission.
type BackendStats struct {
	// Backend is the model and model name.
	Backend Backend
	// Inflight counts model calls holding a slot; Waiting those queued.
	Inflight, Waiting int
	// Limit is the current inflight limit; zero means unlimited.
	Limit int
	// LimitHistory is how the adaptive limit changed, from its start.
	LimitHistory []sched.Change
	// Throttles counts model calls the backend rate-limited or refused as
	// overloaded.
	Throttles int64
	// Pauses counts how often backpressure paused admission.
	Pauses int64
	// RateLimits are the request and token budgets in force (configured
	// or learnt from the backend); zero means none.
	RateLimits RateLimit
}

func (g *gate) stats() BackendStats {
	s := g.g.Stats()
	return BackendStats{Backend: g.key, Inflight: s.Inflight, Waiting: s.Waiting, Limit: s.Limit,
		LimitHistory: s.LimitHistory, Throttles: s.Throttles, Pauses: s.Pauses,
		RateLimits: RateLimit{RPM: s.RPM, TPM: s.TPM}}
}
