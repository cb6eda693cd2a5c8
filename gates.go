package batchagent

import (
	"cmp"
	"context"
	"fmt"
	"reflect"

	"github.com/batchagent/batchagent/internal/engine"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// Defaults of [Admission].
const (
	DefaultMaxQueued     = sched.DefaultMaxQueued
	DefaultProbeInterval = sched.DefaultProbeInterval
	// DefaultStartWindow is the default of [Admission.StartWindow].
	DefaultStartWindow = sched.DefaultStartWindow
	// FirstStartWindow caps the start window until a backend has answered
	// any call of the engine: connections refused from the first call on
	// (a wrong URL) stop the run within about a second.
	FirstStartWindow = sched.FirstWindow
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

// admission returns the admission of the backend m serves under name: the
// Admission of Backends, or the default one, turned into the gate's
// settings.
func (c Config) admission(m llm.Model, name string) (engine.Admission, error) {
	a := c.Admission
	if reflect.TypeOf(m).Comparable() {
		if b, ok := c.Backends[Backend{Model: m, Name: name}]; ok {
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
	}
	if !a.NoStartWindow {
		cfg.StartWindow = cmp.Or(a.StartWindow, DefaultStartWindow)
	}
	policy, err := schedPolicy(a.Policy)
	if err != nil {
		return engine.Admission{}, err // New validated it: cannot happen
	}
	cfg.Policy = policy
	cont := a.Continuation
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
	if a.RateLimit.Shared != nil {
		sh, err := a.RateLimit.Shared(Backend{Model: m, Name: name})
		if err != nil {
			return engine.Admission{}, fmt.Errorf("batchagent: shared rate limit of backend %q: %w", name, err)
		}
		cfg.Shared = sh
	}
	if a.SharedInflight != nil {
		sl, err := a.SharedInflight(Backend{Model: m, Name: name})
		if err != nil {
			return engine.Admission{}, fmt.Errorf("batchagent: shared inflight limit of backend %q: %w", name, err)
		}
		cfg.SharedSlots = sl
	}
	count := a.RateLimit.CountTokens
	if count == nil {
		count = estimateTokens
	}
	gated := cfg.Limit > 0 || cfg.RPM > 0 || cfg.TPM > 0 || cfg.Warm || cfg.Probe != nil || cfg.Shared != nil || cfg.SharedSlots != nil || hosted
	return engine.Admission{Gate: cfg, Count: count, Gated: gated, Continuation: cont}, nil
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

// capabilities returns what m declares, and whether it declares anything
// (a hosted or self-hosted backend, not an in-process model).
func capabilities(m llm.Model) (llm.Capabilities, bool) {
	if c, ok := m.(llm.Capable); ok {
		return c.Capabilities(), true
	}
	return llm.Capabilities{}, false
}
