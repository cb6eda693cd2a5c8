package batchagent

import (
	"slices"
	"sync/atomic"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/sched"
	"github.com/batchagent/batchagent/tool"
)

// Stats is a snapshot of an engine's counters across its runs.
type Stats struct {
	// Started counts inputs admitted (agents started or failed at once).
	Started int64
	// Done counts results delivered; OK and Failed split them.
	Done, OK, Failed int64
	// Restored counts the results of Done read from the checkpoint: agents
	// finished by an earlier run. The counters of work below (model calls,
	// turns, tool calls, tokens) hold this engine's work only, so they
	// leave these out, and a resumed agent's turns of earlier runs too.
	Restored int64
	// ByKind counts failures by kind.
	ByKind map[Kind]int64
	// ModelCalls counts model call attempts.
	ModelCalls int64
	// Turns counts completed model turns.
	Turns int64
	// ToolCalls counts tool calls requested by models.
	ToolCalls int64
	// ToolExecuted counts tool executions (after coalescing and caching).
	ToolExecuted int64
	// Tools has the per-tool counters of the specs' pools: first the sums,
	// by tool name, of the specs no longer in use (garbage), then those of
	// each live spec.
	Tools []tool.Stats
	// Usage sums the tokens of this engine's model calls.
	Usage llm.Usage
	// Inflight, Waiting, Throttles and Pauses sum those of Backends;
	// Limit sums their limits, and is zero (unlimited) when one is.
	Inflight, Waiting int
	Limit             int
	Throttles, Pauses int64
	// LimitHistory and RateLimits are those of the engine's backend, when
	// it has exactly one.
	LimitHistory []sched.Change
	RateLimits   RateLimit
	// CheckpointErrors counts checkpoint saves that failed: those agents'
	// progress may be redone on resume.
	CheckpointErrors int64
	// Backends has the admission of each backend the engine's jobs used,
	// in the order of first use.
	Backends []BackendStats
}

// Stats returns a snapshot of the engine's counters. It is safe to call
// while runs are in progress.
func (e *Engine) Stats() Stats {
	s := e.stats.snapshot()
	e.toolsMu.Lock()
	defer e.toolsMu.Unlock()
	for _, t := range e.retiredTools {
		s.Tools = append(s.Tools, t)
		s.ToolExecuted += t.Executed
	}
	e.runners.Range(func(_, v any) bool {
		if pool := v.(*runner).pool; pool != nil {
			for _, t := range pool.Stats() {
				s.Tools = append(s.Tools, t)
				s.ToolExecuted += t.Executed
			}
		}
		return true
	})
	e.gatesMu.Lock()
	gates := make([]*gate, 0, len(e.gates))
	for _, g := range e.gates {
		gates = append(gates, g)
	}
	e.gatesMu.Unlock()
	slices.SortFunc(gates, func(a, b *gate) int { return int(a.order - b.order) })
	unlimited := false
	for _, g := range gates {
		b := g.stats()
		s.Backends = append(s.Backends, b)
		s.Inflight += b.Inflight
		s.Waiting += b.Waiting
		s.Limit += b.Limit
		unlimited = unlimited || b.Limit == 0
		s.Throttles += b.Throttles
		s.Pauses += b.Pauses
	}
	if unlimited {
		s.Limit = 0
	}
	if len(s.Backends) == 1 {
		s.LimitHistory, s.RateLimits = s.Backends[0].LimitHistory, s.Backends[0].RateLimits
	}
	return s
}

// counters accumulates delivered results.
type counters struct {
	started, done, ok atomic.Int64
	restored          atomic.Int64
	ckptErrors        atomic.Int64
	modelCalls, turns atomic.Int64
	toolCalls         atomic.Int64
	prompt, compl     atomic.Int64
	cached            atomic.Int64
	byKind            [job.NumKinds]atomic.Int64 // indexed like kinds
}

func (c *counters) add(o outcome) {
	r, p := o.Result, o.prior
	c.done.Add(1)
	if o.restored {
		c.restored.Add(1)
	}
	if r.Err == nil {
		c.ok.Add(1)
	} else {
		if i := slices.Index(job.Kinds, KindOf(r.Err)); i >= 0 {
			c.byKind[i].Add(1)
		}
	}
	c.modelCalls.Add(int64(r.ModelCalls - p.modelCalls))
	c.turns.Add(int64(r.Turns - p.turns))
	c.toolCalls.Add(int64(r.ToolCalls - p.toolCalls))
	c.prompt.Add(r.Usage.PromptTokens - p.usage.PromptTokens)
	c.compl.Add(r.Usage.CompletionTokens - p.usage.CompletionTokens)
	c.cached.Add(r.Usage.CachedTokens - p.usage.CachedTokens)
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Started:          c.started.Load(),
		Done:             c.done.Load(),
		OK:               c.ok.Load(),
		Restored:         c.restored.Load(),
		CheckpointErrors: c.ckptErrors.Load(),
		ModelCalls:       c.modelCalls.Load(),
		Turns:            c.turns.Load(),
		ToolCalls:        c.toolCalls.Load(),
		Usage:            llm.Usage{PromptTokens: c.prompt.Load(), CompletionTokens: c.compl.Load(), CachedTokens: c.cached.Load()},
		ByKind:           map[Kind]int64{},
	}
	s.Failed = s.Done - s.OK
	for i, k := range job.Kinds {
		if n := c.byKind[i].Load(); n > 0 {
			s.ByKind[k] = n
		}
	}
	return s
}
