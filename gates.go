package batchagent

import (
	"cmp"
	"context"
	"fmt"
	"reflect"

	"github.com/batchagent/batchagent/internal/engine"
	"github.com/batchagent/batchagent/job"
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
var ErrBackendUnavailable = job.ErrBackendUnavailable

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
	// The limit and where it adapts from are the gate's defaults: the
	// backend's declared default, and slow start against a probed server.
	cfg.Limit, cfg.Declared, cfg.SlowStart = a.MaxInflight, caps.DefaultConcurrency, cfg.Probe != nil
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
	gated := cfg.Limits() || hosted
	return engine.Admission{Gate: cfg, Count: a.RateLimit.CountTokens, Gated: gated, Continuation: cont}, nil
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
