package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/tool"
)

// DefaultInterval is how often a [Sampler] reads the counters by default.
const DefaultInterval = time.Second

// DefaultMaxSamples is how many samples a [Sampler] keeps in memory by
// default; past it, it keeps every other one.
const DefaultMaxSamples = 2000

// DefaultMaxAgents is how many finished agents a [Sampler] keeps in memory
// by default for the live timeline and histograms; past it, it keeps every
// other one.
const DefaultMaxAgents = 20000

// persistTimeout bounds the save of the final sample, made after the
// run's context has ended.
const persistTimeout = 5 * time.Second

// PersistFunc records one sample, encoded as JSON, taken at the given
// moment: the CLI's adds it to the run's checkpoint store, from which
// [Load] reads it back. An error is counted, not fatal: sampling goes on.
type PersistFunc func(ctx context.Context, at time.Time, data json.RawMessage) error

// SamplerConfig configures a [Sampler].
type SamplerConfig struct {
	// Stats returns the engine's counters; required.
	Stats func() batchagent.Stats
	// Info names the run's job, model and price.
	Info Info
	// Inputs is the run's number of inputs; zero means unknown.
	Inputs int
	// Interval is how often the counters are read. Defaults to
	// DefaultInterval.
	Interval time.Duration
	// MaxSamples bounds the samples kept in memory: past it, every other
	// one is dropped. Defaults to DefaultMaxSamples.
	MaxSamples int
	// MaxAgents bounds the finished agents kept in memory for the live
	// charts: past it, every other one is dropped (the counters stay
	// exact; a report from the state file has them all). Defaults to
	// DefaultMaxAgents.
	MaxAgents int
	// Persist, when set, records every sample.
	Persist PersistFunc
}

// A Sampler records a run as it goes: the engine's counters once an
// interval, and the results it is handed. [Sampler.Data] draws the run
// so far; [Live] serves it. Its methods are safe for concurrent use.
type Sampler struct {
	cfg  SamplerConfig
	done chan struct{} // closed when Run has taken its last sample

	mu sync.Mutex // protects the fields below
	// start is when Run began, the samples' zero; last the latest
	// sample's moment and stats its counters.
	start, last time.Time
	stats       batchagent.Stats
	samples     []Sample
	agents      []Agent
	changed     chan struct{} // closed and replaced by each new sample
	persisted   int           // samples recorded by Persist
	persistErr  error         // the first error of Persist
	persistErrs int
}

// NewSampler returns a Sampler of cfg. It returns an error when cfg.Stats
// is nil or a setting is negative.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	switch {
	case cfg.Stats == nil:
		return nil, errors.New("report: sampler: Stats is nil")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("report: sampler: Interval %v is negative", cfg.Interval)
	case cfg.MaxSamples < 0:
		return nil, fmt.Errorf("report: sampler: MaxSamples %d is negative", cfg.MaxSamples)
	case cfg.MaxAgents < 0:
		return nil, fmt.Errorf("report: sampler: MaxAgents %d is negative", cfg.MaxAgents)
	}
	if cfg.MaxAgents == 0 {
		cfg.MaxAgents = DefaultMaxAgents
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxSamples == 0 {
		cfg.MaxSamples = DefaultMaxSamples
	}
	cfg.MaxSamples = max(cfg.MaxSamples, 2)
	return &Sampler{cfg: cfg, done: make(chan struct{}), changed: make(chan struct{})}, nil
}

// Run samples the counters at once and then every interval until ctx
// ends; then it takes a last sample (recorded within a few seconds even
// though ctx has ended) and marks the run done. It returns only then:
// the caller cancels ctx once the run is over. It returns the first error
// of Persist, with their count, or nil. Run must be called once.
func (s *Sampler) Run(ctx context.Context) error {
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.sample(ctx, false)
		select {
		case <-t.C:
		case <-ctx.Done():
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
			defer cancel()
			s.sample(pctx, true)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.persistErr != nil {
				return fmt.Errorf("report: recording samples: %d failed, the first: %w", s.persistErrs, s.persistErr)
			}
			return nil
		}
	}
}

// persisted is a sample as Persist records it; the first of a run
// carries the run's Info too.
type persisted struct {
	Sample
	Info  *Info        `json:"info,omitempty"`
	Tools []tool.Stats `json:"tools,omitempty"` // the per-tool counters so far
}

// sample reads the counters, keeps a sample, records it and wakes the
// watchers; last marks the run done.
func (s *Sampler) sample(ctx context.Context, last bool) {
	st := s.cfg.Stats()
	now := time.Now()
	s.mu.Lock()
	smp := Sample{
		T:    now.Sub(s.start).Seconds(),
		Done: st.Done, OK: st.OK, Failed: st.Failed,
		Active:        max(st.Started-st.Done, 0),
		AgentsCalling: st.AgentsCalling, AgentsInTools: st.AgentsInTools, AgentsWaitingForSlot: st.AgentsWaiting,
		Inflight: st.Inflight, Limit: st.Limit, Throttles: st.Throttles,
		Tokens: st.Usage.Total(), ToolErrors: st.ToolErrors,
	}
	if p := s.cfg.Info.Price; p != nil {
		smp.Cost = p.Cost(st.Usage)
	}
	s.stats, s.last = st, now
	s.samples = append(s.samples, smp)
	if len(s.samples) > s.cfg.MaxSamples {
		s.samples = thin(s.samples)
	}
	rec := persisted{Sample: smp, Tools: toolsByName(st.Tools)}
	if s.persisted == 0 {
		rec.Info = &s.cfg.Info
	}
	s.persisted++
	s.mu.Unlock()
	if s.cfg.Persist != nil {
		data, err := json.Marshal(rec)
		if err == nil {
			err = s.cfg.Persist(ctx, now, data)
		}
		if err != nil {
			s.mu.Lock()
			if s.persistErr == nil {
				s.persistErr = err
			}
			s.persistErrs++
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	if last {
		close(s.done)
	}
	s.mu.Unlock()
}

// thin keeps every other sample of ss, the last one included, in place.
func thin(ss []Sample) []Sample {
	n := 0
	for i := range ss {
		if i%2 == 0 || i == len(ss)-1 {
			ss[n] = ss[i]
			n++
		}
	}
	return ss[:n]
}

// Result records a finished agent for the timeline and the histograms.
// The engine's OnResult or the loop reading its results calls it.
func (s *Sampler) Result(r batchagent.Result) {
	a := agentOfResult(r, time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agents = append(s.agents, a)
	if len(s.agents) > s.cfg.MaxAgents {
		n := 0
		for i := range s.agents {
			if i%2 == 0 {
				s.agents[n] = s.agents[i]
				n++
			}
		}
		clear(s.agents[n:]) // their spans are garbage
		s.agents = s.agents[:n]
	}
}

// agentOfResult returns the agent of a result that arrived at now.
func agentOfResult(r batchagent.Result, now time.Time) Agent {
	a := Agent{Index: r.Index, Status: "done", Tier: r.Tier, Started: r.Started, Total: r.Timings.Total,
		TTFT: r.Timings.TTFT, Queue: r.Timings.Queue, Usage: r.Usage, Spans: spansOf(r.Spans)}
	if r.Err != nil {
		a.Status, a.Kind = "failed", string(batchagent.KindOf(r.Err))
	}
	if a.Started.IsZero() && a.Total > 0 {
		a.Started = now.Add(-a.Total) // a result made without the engine's times
	}
	return a
}

// Changed returns a channel closed by the next sample.
func (s *Sampler) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Done returns a channel closed once Run has taken its last sample.
func (s *Sampler) Done() <-chan struct{} { return s.done }

// Samples returns a copy of the samples kept, oldest first.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// Data returns the run so far: the latest counters, the samples, and the
// agents of the results recorded. The caller owns it.
func (s *Sampler) Data() *Data {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	d := &Data{
		Info: s.cfg.Info, Start: s.start, End: s.last,
		Totals: Totals{
			Inputs: s.cfg.Inputs, Done: st.Done, OK: st.OK, Failed: st.Failed,
			Running: max(st.Started-st.Done, 0), ModelCalls: st.ModelCalls, Usage: st.Usage,
			AgentsCalling: st.AgentsCalling, AgentsInTools: st.AgentsInTools, AgentsWaitingForSlot: st.AgentsWaiting,
			ToolErrors: st.ToolErrors,
			ByKind:     make(map[string]int64, len(st.ByKind)),
		},
		Agents:  slices.Clone(s.agents),
		Samples: slices.Clone(s.samples),
		Tools:   toolsByName(st.Tools),
	}
	if d.Totals.Inputs == 0 {
		d.Totals.Inputs = -1
	}
	for k, n := range st.ByKind {
		if n > 0 {
			d.Totals.ByKind[string(k)] = n
		}
	}
	select {
	case <-s.done:
		d.Done = true
	default:
	}
	sortAgents(d.Agents)
	return d
}

// toolsByName sums the counters of each tool name, sorted by name.
func toolsByName(ts []tool.Stats) []tool.Stats {
	by := make(map[string]tool.Stats)
	for _, t := range ts {
		b := by[t.Name]
		b.Name = t.Name
		b.Requested += t.Requested
		b.Executed += t.Executed
		b.Coalesced += t.Coalesced
		b.CacheHits += t.CacheHits
		b.SharedHits += t.SharedHits
		b.Errors += t.Errors
		b.Batches += t.Batches
		by[t.Name] = b
	}
	out := make([]tool.Stats, 0, len(by))
	for _, name := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[name])
	}
	return out
}
