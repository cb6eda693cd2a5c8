package batchagent

import (
	"log/slog"

	"github.com/batchagent/batchagent/internal/engine"
)

// DefaultMaxActive is the default of [Config.MaxActive].
const DefaultMaxActive = engine.DefaultMaxActive

// Config holds an [Engine]'s settings: what every job run on it shares. The
// zero value is usable: an engine with the defaults, no checkpoint and no
// logger. What to run is a [Spec], given to each call.
type Config struct {
	// MaxActive caps the agents alive at once across the engine's runs
	// (Run and Stream), and so memory: results wait in a buffer of this
	// size when a consumer is slow. Runs in progress take turns for the
	// places, so two runs started together share them equally. Agents of
	// Submit are not counted: the caller holds each one's Handle.
	// Defaults to DefaultMaxActive.
	MaxActive int
	// Admission is the admission of model calls to each backend, for the
	// backends Backends does not name. Every job whose Spec has the same
	// Model and model name shares one admission: one adaptive limit, one
	// rate budget, one queue probe, one prefix warm-up. Defaults to
	// Admission's zero value.
	Admission Admission
	// Backends sets the admission of particular backends. Defaults to
	// none.
	Backends map[Backend]Admission
	// Checkpoint, if set, saves every completed turn and final result, and
	// a run resumes from what it holds: finished inputs are not run again
	// (their saved results are delivered), unfinished agents continue from
	// their last completed turn. States are saved under the Spec's ID.
	// Defaults to nil: no checkpointing.
	Checkpoint Checkpointer
	// ResponseCache, when set, is the response cache the engine's models
	// answer through (respcache's Wrap): its hits are reported in
	// [Stats].CachedCalls and SavedUsage. Nil means none.
	ResponseCache CacheCounter
	// RetryFailed, with Checkpoint, runs inputs whose saved result is a
	// failure again. Defaults to false.
	RetryFailed bool
	// StopOnCheckpointError, with Checkpoint, makes a failed save fatal:
	// the engine drains (see [Engine.Drain]: no more inputs are admitted,
	// agents stop after their turn in flight), and an agent whose final
	// state could not be saved yields, instead of its outcome, a result of
	// kind [KindCanceled] whose error wraps [ErrCheckpoint]; so every
	// result delivered as done or failed is one a resumed run finds.
	// Stats.CheckpointErrors counts the failed saves. Defaults to false: a
	// failed save is logged and counted, and the result delivered all the
	// same.
	StopOnCheckpointError bool
	// OnResult, if set, is called once per result of Run and Stream, in
	// completion order within each run, serially within a run, before the
	// result is returned or yielded. It runs outside the agents: a slow
	// callback delays delivery, not the agents, until MaxActive results
	// are waiting. Results of Submit are not passed to it: the Handle has
	// them. Defaults to none.
	OnResult OnResultFunc
	// Logger receives lifecycle events and warnings. Defaults to none:
	// silent.
	Logger *slog.Logger
	// Breaker configures the circuit breaker of each backend that jobs
	// with fallbacks (job.Def.Fallbacks) use. Defaults to Breaker's
	// defaults.
	Breaker Breaker
}

// OnResultFunc receives each result as it completes.
type OnResultFunc func(Result)

// ErrBadConfig is wrapped by the error [New] returns for an invalid
// [Config].
var ErrBadConfig = engine.ErrBadConfig
