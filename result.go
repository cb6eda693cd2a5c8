package batchagent

import "github.com/batchagent/batchagent/job"

// Result is the outcome of one input: its output or its error, counters,
// usage and timings. See [job.Result].
type Result = job.Result

// Timings splits an agent's wall time. See [job.Timings].
type Timings = job.Timings

// Span is one model turn of an agent as it ran, in [Result.Spans]. See
// [job.Span].
type Span = job.Span

// MaxSpans is the most spans an agent keeps. See [job.MaxSpans].
const MaxSpans = job.MaxSpans

// AgentError reports the failure of one agent of a job. See
// [job.AgentError].
type AgentError = job.AgentError

// Kind classifies why an agent failed.
type Kind = job.Kind

// The kinds of failure.
const (
	KindBackend    = job.KindBackend    // the backend failed permanently, or transient errors outlasted the retries
	KindRateLimit  = job.KindRateLimit  // rate limited beyond the retries
	KindTimeout    = job.KindTimeout    // the agent's timeout, or a backend timeout, expired
	KindTool       = job.KindTool       // a tool failed fatally
	KindValidation = job.KindValidation // the output stayed invalid after the corrections
	KindMaxTurns   = job.KindMaxTurns   // no final answer within the turn limit
	KindTemplate   = job.KindTemplate   // the task template could not be rendered for the input
	KindInput      = job.KindInput      // the input could not be decoded
	KindCanceled   = job.KindCanceled   // the run was cancelled before the agent finished
	KindTruncated  = job.KindTruncated  // the answer was cut off: at the token cap on every retry, or at the client's size cap
	KindPanic      = job.KindPanic      // code the engine runs but did not write (a fallback Func, Check, a custom model, OnResult) panicked
)

// PanicError is a panic recovered from code the engine runs but did not
// write: a fallback Func, a Check, a custom model's Generate or Stream, an
// OnResult hook. It fails that one agent (kind [KindPanic], class "panic"),
// the engine logs its stack at Error and goes on. A tool's panic is
// recovered by its pool and goes back to the model as the tool's error
// result (a tool.PanicError). See [job.PanicError].
type PanicError = job.PanicError

// ErrPanic is matched (errors.Is) by every [*PanicError].
var ErrPanic = job.ErrPanic

// Kinds lists every Kind, in a fixed order.
var Kinds = job.Kinds

// KindOf returns the kind of a result's error, or "" for nil.
func KindOf(err error) Kind { return job.KindOf(err) }

// Decode unmarshals a result's output into a T. It returns the result's
// error when it failed.
func Decode[T any](r Result) (T, error) { return job.Decode[T](r) }

// ErrCheckpoint is wrapped by the error of a result whose final state could
// not be saved when [Config.StopOnCheckpointError] is set: the result is
// not delivered as the agent's outcome (a resumed run would not find it),
// and its kind is [KindCanceled], so a resume runs the input again.
var ErrCheckpoint = job.ErrCheckpoint
