package engine

import (
	"slices"
	"sync/atomic"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// Counts is a snapshot of an engine's counters; batchagent.Stats
// documents each.
type Counts struct {
	Started, Done, OK, Failed, Restored int64
	CheckpointErrors                    int64
	ModelCalls, Turns, ToolCalls        int64
	Unanswered                          int64
	PackCalls, Packed, PackAlone        int64
	PackVerified, PackAgreed            int64
	Usage                               llm.Usage
	ByKind                              map[job.Kind]int64
	// AgentsWaiting, AgentsCalling and AgentsInTools are the engine's
	// agent.Gauges: agents waiting for a slot, in a model call, and
	// executing tool calls.
	AgentsWaiting, AgentsCalling, AgentsInTools int64
}

// counters accumulates delivered results.
type counters struct {
	started, done, ok atomic.Int64
	restored          atomic.Int64
	ckptErrors        atomic.Int64
	modelCalls, turns atomic.Int64
	unanswered        atomic.Int64 // model calls that got no answer (gate.go)
	toolCalls         atomic.Int64
	prompt, compl     atomic.Int64
	cached            atomic.Int64
	media             atomic.Int64               // media tokens, the part of prompt that is media
	byKind            [job.NumKinds]atomic.Int64 // indexed like job.Kinds
	byTier            [maxTiers]atomic.Int64     // answers by Result.Tier; later tiers count as the last
	packCalls         atomic.Int64               // packed model calls
	packed            atomic.Int64               // results answered by a packed call
	packAlone         atomic.Int64               // agents of packing jobs that ran alone
	packVerified      atomic.Int64               // packed answers checked against one alone
	packAgreed        atomic.Int64               // of those, the ones that agreed
}

// addUsage counts the tokens of a call no result carries: a packed call's.
func (c *counters) addUsage(u llm.Usage) {
	c.prompt.Add(u.PromptTokens)
	c.compl.Add(u.CompletionTokens)
	c.cached.Add(u.CachedTokens)
	if u.MediaTokens != 0 {
		c.media.Add(u.MediaTokens)
	}
}

func (c *counters) add(o *outcome) {
	r, p := o.Result, o.prior
	c.done.Add(1)
	if r.Err == nil { // answers, not attempts: a failed result's Tier is the last tier tried
		c.byTier[min(max(r.Tier, 0), maxTiers-1)].Add(1)
	}
	if o.restored {
		c.restored.Add(1)
	}
	if r.Packed > 0 {
		c.packed.Add(1)
	}
	if r.Err == nil {
		c.ok.Add(1)
	} else {
		if i := slices.Index(job.Kinds, job.KindOf(r.Err)); i >= 0 {
			c.byKind[i].Add(1)
		}
	}
	c.modelCalls.Add(int64(r.ModelCalls - p.modelCalls))
	c.turns.Add(int64(r.Turns - p.turns))
	c.toolCalls.Add(int64(r.ToolCalls - p.toolCalls))
	c.prompt.Add(r.Usage.PromptTokens - p.usage.PromptTokens)
	c.compl.Add(r.Usage.CompletionTokens - p.usage.CompletionTokens)
	c.cached.Add(r.Usage.CachedTokens - p.usage.CachedTokens)
	if d := r.Usage.MediaTokens - p.usage.MediaTokens; d != 0 { // text-only results touch no shared counter
		c.media.Add(d)
	}
}

// Counts returns a snapshot of the engine's counters. It is safe to call
// while runs are in progress.
func (e *Engine) Counts() Counts {
	c := &e.stats
	s := Counts{
		Started:          c.started.Load(),
		Done:             c.done.Load(),
		OK:               c.ok.Load(),
		Restored:         c.restored.Load(),
		CheckpointErrors: c.ckptErrors.Load(),
		ModelCalls:       c.modelCalls.Load(),
		Unanswered:       c.unanswered.Load(),
		Turns:            c.turns.Load(),
		ToolCalls:        c.toolCalls.Load(),
		PackCalls:        c.packCalls.Load(),
		Packed:           c.packed.Load(),
		PackAlone:        c.packAlone.Load(),
		PackVerified:     c.packVerified.Load(),
		PackAgreed:       c.packAgreed.Load(),
		Usage:            llm.Usage{PromptTokens: c.prompt.Load(), CompletionTokens: c.compl.Load(), CachedTokens: c.cached.Load(), MediaTokens: c.media.Load()},
		ByKind:           map[job.Kind]int64{},
		AgentsWaiting:    max(e.gauges.Waiting.Load(), 0),
		AgentsCalling:    max(e.gauges.Calling.Load(), 0),
		AgentsInTools:    max(e.gauges.Tools.Load(), 0),
	}
	s.Failed = s.Done - s.OK
	for i, k := range job.Kinds {
		if n := c.byKind[i].Load(); n > 0 {
			s.ByKind[k] = n
		}
	}
	return s
}

// Tools returns the per-tool counters of the specs' pools: first the sums,
// by tool name, of the specs no longer in use, then those of each live
// spec.
func (e *Engine) Tools() []tool.Stats {
	e.toolsMu.Lock()
	defer e.toolsMu.Unlock()
	tools := slices.Clone(e.retiredTools)
	e.runners.Range(func(_, v any) bool {
		if pool := v.(*runner).pool; pool != nil {
			tools = append(tools, pool.Stats()...)
		}
		return true
	})
	return tools
}
