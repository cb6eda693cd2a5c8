package batchagent

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
)

// A gate is one backend's admission, shared by every job of the engine
// whose Spec names that backend (Model and model name).
type gate struct {
	key   Backend
	order int // creation order, for Stats
	adm   *admission
	gated bool // adm is consulted for every model call
	probe llm.QueueProber
	bp    Backpressure

	mu        sync.Mutex // protects the fields below
	runs      int        // runs in progress: the probe runs while there is one
	stopProbe context.CancelFunc
	probeDone chan struct{}
}

// backendKey is the key of a comparable model's gate.
type backendKey Backend

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
	g := &gate{key: Backend{Model: m, Name: name}, order: len(e.gates), bp: a.Backpressure}
	if p, ok := m.(llm.QueueProber); ok && caps.QueueProbe && !a.Backpressure.Disabled {
		g.probe = p
		if g.bp.MaxQueued == 0 {
			g.bp.MaxQueued = DefaultMaxQueued
		}
		if g.bp.Interval == 0 {
			g.bp.Interval = DefaultProbeInterval
		}
	}
	var err error
	if g.adm, err = newAdmission(a, caps.DefaultConcurrency, g.probe != nil, e.log); err != nil {
		return nil, err
	}
	g.adm.stop = e.drained
	g.gated = g.adm.slots.Limit() > 0 || a.RateLimit.RPM > 0 || a.RateLimit.TPM > 0 || a.WarmPrefix || g.probe != nil || hosted
	e.gates[key] = g
	return g, nil
}

// beginRun registers a run with the backend's outage detection and starts
// the queue probe for the first run in progress.
func (g *gate) beginRun() *outageRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs++
	if g.runs == 1 && g.probe != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		g.stopProbe, g.probeDone = cancel, done
		go func() { // owned by the gate: the last endRun stops and waits for it
			defer close(done)
			g.adm.probe(ctx, g.probe, g.bp)
		}()
	}
	return g.adm.out.begin()
}

// endRun unregisters a run that beginRun returned; the last one stops the
// probe and waits for it.
func (g *gate) endRun(r *outageRun) {
	g.adm.out.end(r)
	g.mu.Lock()
	g.runs--
	var stop context.CancelFunc
	var done chan struct{}
	if g.runs == 0 && g.stopProbe != nil {
		stop, done = g.stopProbe, g.probeDone
		g.stopProbe, g.probeDone = nil, nil
	}
	g.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// classGate is the agent.Gate of one job's agents: the backend's gate, in
// the job's priority class, each call in the flow its context names.
type classGate struct {
	adm   *admission
	class sched.Class
}

func (c *classGate) Acquire(ctx context.Context, priority int, req *llm.Request) (agent.Permit, error) {
	flow, _ := ctx.Value(flowKey{}).(uint64)
	return c.adm.Acquire(ctx, c.class, flow, priority, req)
}

// flowKey is the context key of the scheduling flow of an agent's calls:
// each run is a flow, and so is each spec's Submits; the flows of a class
// take turns for the backend's slots.
type flowKey struct{}

func (c *classGate) LastAnswer() time.Time { return c.adm.LastAnswer() }

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
	a := g.adm
	ss := a.slots.Stats()
	s := BackendStats{Backend: g.key, Inflight: ss.Inflight, Waiting: ss.Waiting, Limit: ss.Limit,
		Throttles: a.throttl.Load(), Pauses: a.pauses.Load()}
	if a.aimd != nil {
		s.LimitHistory = a.aimd.History()
	}
	rl := a.rate.Limits()
	s.RateLimits = RateLimit{RPM: rl.RPM, TPM: rl.TPM}
	return s
}
