package batchagent

import (
	"github.com/batchagent/batchagent/admission"
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
	// ModelCalls counts model call attempts, packed calls included.
	ModelCalls int64
	// Unanswered counts the model call attempts that got no answer from a
	// server: the connection failed before any answer, without an HTTP
	// status (refused, reset, a host name that did not resolve), or the
	// call was abandoned (a cancellation, a deadline, the run's stop)
	// before its answer began. ModelCalls less Unanswered is the calls a
	// server answered. Only calls through a backend's admission (every
	// HTTP backend) are counted.
	Unanswered int64
	// PackCalls counts packed model calls: calls that answered several
	// agents of a job that packs (Spec.Pack). Packed counts the results
	// they answered, and PackAlone the agents of such jobs that ran alone
	// instead (their packed answer was missing or invalid, their task too
	// large, or packing failed).
	PackCalls, Packed, PackAlone int64
	// PackVerified counts the packed answers checked against the answer
	// their task got alone (Pack.Verify; those agents count in PackAlone,
	// and their results are the alone answers), and PackAgreed those
	// that agreed: PackAgreed / PackVerified is the agreement rate.
	PackVerified, PackAgreed int64
	// Turns counts completed model turns.
	Turns int64
	// ToolCalls counts tool calls requested by models.
	ToolCalls int64
	// ToolExecuted counts tool executions (after coalescing and caching).
	ToolExecuted int64
	// ToolErrors counts the tool calls that returned an error (malformed
	// arguments, the tool's failure, the caller leaving): the sum of the
	// Errors of Tools. The model is shown each one and the agent goes on,
	// so they fail no result by themselves.
	ToolErrors int64
	// Tools has the per-tool counters of the specs' pools: first the sums,
	// by tool name, of the specs no longer in use (garbage), then those of
	// each live spec.
	Tools []tool.Stats
	// Usage sums the tokens of this engine's model calls, packed calls
	// included (packed results carry none of their own).
	Usage llm.Usage
	// AgentsCalling, AgentsInTools and AgentsWaiting count the agents
	// running now by what each is doing: in a model call, executing a
	// turn's tool calls, or waiting for a slot (see [agent.Gauges]). The
	// others running, Started less Done less these three, are between
	// them (rendering, back-off, validation, checkpointing). Each is read
	// apart, so the sum may briefly be off by an agent or two.
	AgentsCalling, AgentsInTools, AgentsWaiting int64
	// Inflight and Waiting count model calls, not agents: those holding a
	// slot of a backend's admission and those waiting for one, of every
	// kind (agents' calls, packed calls that answer several agents at
	// once, and the gateway's [Engine.Call]s), summed over Backends.
	// Calls to a backend without admission are not counted.
	// Throttles and Pauses sum those of Backends; Limit sums their
	// limits, and is zero (unlimited) when one is.
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
	// ByTier counts answers by the tier that gave them (Result.Tier): 0
	// the job's model, 1 and on its fallbacks (the eighth counts the later
	// ones too). A failed result is not counted, whatever tier it reached.
	ByTier map[int]int64
	// CachedCalls counts the model calls answered from the engine's
	// response cache ([Config.ResponseCache]) instead of a backend, and
	// SavedUsage the tokens those answers had cost when first paid. Zero
	// without a cache.
	CachedCalls int64
	SavedUsage  llm.Usage
	// BreakerChanges counts the state changes of the backends' circuit
	// breakers (closed to open, open to half-open, half-open to closed or
	// open).
	BreakerChanges int64
}

// Stats returns a snapshot of the engine's counters. It is safe to call
// while runs are in progress.
func (e *Engine) Stats() Stats {
	c := e.core.Counts()
	s := Stats{
		Started: c.Started, Done: c.Done, OK: c.OK, Failed: c.Failed, Restored: c.Restored,
		ByKind: c.ByKind, ModelCalls: c.ModelCalls, Unanswered: c.Unanswered, Turns: c.Turns, ToolCalls: c.ToolCalls,
		PackCalls: c.PackCalls, Packed: c.Packed, PackAlone: c.PackAlone,
		PackVerified: c.PackVerified, PackAgreed: c.PackAgreed, Backends: e.core.Gates(),
		Usage: c.Usage, CheckpointErrors: c.CheckpointErrors, Tools: e.core.Tools(),
		AgentsCalling: c.AgentsCalling, AgentsInTools: c.AgentsInTools, AgentsWaiting: c.AgentsWaiting,
	}
	for _, t := range s.Tools {
		s.ToolExecuted += t.Executed
		s.ToolErrors += t.Errors
	}
	s.ByTier, s.BreakerChanges = e.core.ByTier()
	if e.cache != nil {
		s.CachedCalls, s.SavedUsage = e.cache.Counts()
	}
	t := admission.Total(s.Backends)
	s.Inflight, s.Waiting, s.Limit, s.Throttles, s.Pauses, s.LimitHistory, s.RateLimits = t.Inflight, t.Waiting, t.Limit, t.Throttles, t.Pauses, t.LimitHistory, t.RateLimits
	return s
}

// A CacheCounter counts the model calls a response cache answered, and
// the tokens their answers had cost: *respcache.Cache is one. Set it as
// [Config.ResponseCache] to have [Engine.Stats] report them.
type CacheCounter interface {
	Counts() (calls int64, saved llm.Usage)
}
