package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// Result is the outcome of one input. Exactly one of Output and Err is set.
type Result struct {
	// Index is the input's 0-based position in the inputs.
	Index int
	// Input is the input, or nil when it could not be decoded.
	Input Input
	// Output is the validated final answer as compact JSON. Without an
	// output schema it is the answer's text as a JSON string.
	Output json.RawMessage
	// Err is nil on success, else an *AgentError.
	Err error
	// Raw is the model's last final answer as written, kept on failure
	// (for example the invalid output of a validation error).
	Raw string
	// ModelCalls counts model calls, retries included.
	ModelCalls int
	// Turns counts completed model turns.
	Turns int
	// ToolCalls counts tool calls the model requested.
	ToolCalls int
	// ToolErrors counts the tool calls that returned an error (sent back
	// to the model as an error result, or, fatal, ending the agent).
	ToolErrors int
	// Repairs counts fixes made to broken JSON in the model's answers.
	Repairs int
	// Truncations counts answers cut off at the token cap (finish reason
	// length) and asked again with a larger cap, or, the last of a failed
	// result, given up on.
	Truncations int
	// Compactions counts the times the agent's conversation was compacted
	// to fit the model's context window (see Def.ContextWindow).
	Compactions int
	// Usage sums the tokens of all the agent's model calls.
	Usage llm.Usage
	// Timings says where the agent's time went.
	Timings Timings
	// Started is when the agent began in the run that finished it; for an
	// input that failed before it could run (an input that could not be
	// decoded, a cancelled run), when it failed. A result restored from a
	// checkpoint has the start saved with it: zero in a state saved before
	// starts were recorded.
	Started time.Time `json:"-"`
	// Spans are the agent's model turns as they ran, in order, earlier
	// runs of a resumed agent included, at most [MaxSpans]. Result lines
	// do not carry them; checkpoints do.
	Spans []Span `json:"-"`
	// Tier is the tier that answered: 0 the job's model, 1 and on its
	// Fallbacks in order. Checkpoints record it.
	Tier int
	// Packed is the number of agents whose answers came in the packed
	// model call that answered this one, itself included (see [Pack]); 0
	// when the agent's own calls answered it. A packed result has no model
	// calls and no usage of its own: the pack's call and tokens are
	// counted in the engine's Stats. Checkpoints record it.
	Packed int
	// CachedCalls counts the agent's model calls answered from a response
	// cache of earlier runs (package respcache), in the run that finished
	// it; SavedTokens counts the prompt and completion tokens those
	// answers had cost, which Usage leaves out. Checkpoints do not record
	// them.
	CachedCalls int
	SavedTokens int64
}

// Timings says where an agent's time went.
type Timings struct {
	// Queue is time spent waiting for an inference slot.
	Queue time.Duration
	// Inference is time spent in model calls.
	Inference time.Duration
	// Tools is time spent waiting for tool results.
	Tools time.Duration
	// Backoff is time spent waiting before retries.
	Backoff time.Duration
	// TTFT is the time from the sending of the first answered model call
	// to its first token; its wait for a slot is Queue's, not TTFT's.
	TTFT time.Duration
	// Total is the agent's wall time.
	Total time.Duration
}

// OK reports whether the result succeeded.
func (r Result) OK() bool { return r.Err == nil }

// Decode unmarshals a result's output into a T. It returns the result's
// error when it failed.
func Decode[T any](r Result) (T, error) {
	var v T
	if r.Err != nil {
		return v, r.Err
	}
	if err := json.Unmarshal(r.Output, &v); err != nil {
		return v, fmt.Errorf("batchagent: decode result %d: %w", r.Index, err)
	}
	return v, nil
}

// Kind classifies why an agent failed.
type Kind string

// The kinds of failure.
const (
	KindBackend    Kind = "backend"    // the backend failed permanently, or transient errors outlasted the retries
	KindRateLimit  Kind = "rate_limit" // rate limited beyond the retries
	KindTimeout    Kind = "timeout"    // the agent's timeout, or a backend timeout, expired
	KindTool       Kind = "tool"       // a tool failed fatally
	KindValidation Kind = "validation" // the output stayed invalid after the corrections
	KindMaxTurns   Kind = "max_turns"  // no final answer within the turn limit
	KindTemplate   Kind = "template"   // the task template could not be rendered for the input
	KindInput      Kind = "input"      // the input could not be decoded
	KindCanceled   Kind = "canceled"   // the run was cancelled before the agent finished
	KindTruncated  Kind = "truncated"  // the answer was cut off: at the token cap (finish reason length) on every retry, or at the client's size cap
	KindPanic      Kind = "panic"      // code the engine runs but did not write (a fallback Func, Check, a custom model, OnResult) panicked
)

// Kinds lists every Kind, in a fixed order.
var Kinds = kinds[:]

// NumKinds is the number of Kinds: the length of an array indexed like
// Kinds.
const NumKinds = len(kinds)

// kinds is Kinds as an array.
var kinds = [...]Kind{KindBackend, KindRateLimit, KindTimeout, KindTool, KindValidation, KindMaxTurns, KindTemplate, KindInput, KindCanceled, KindTruncated, KindPanic}

// AgentError reports the failure of one agent of a job.
type AgentError struct {
	JobID string
	// Agent is the index of the agent's input.
	Agent int
	// Turn is the 0-based turn that failed; -1 if it failed before the
	// first turn.
	Turn int
	// Op is the failed step: "input", "render", "generate", "tool",
	// "validate".
	Op string
	// Kind classifies the failure.
	Kind Kind
	// Err is the cause. In a result restored from a checkpoint it is
	// rebuilt from the saved message and classes: the same text, answering
	// errors.Is for the same class sentinels (llm.ErrRateLimited,
	// context.DeadlineExceeded, [ErrBackendUnavailable], ...) and
	// errors.As for a *schema.ValidationError with the same problems, but
	// not of the original's concrete type otherwise.
	Err error
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("job %s agent %d turn %d: %s: %v", e.JobID, e.Agent, e.Turn, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *AgentError) Unwrap() error { return e.Err }

// Problems returns the schema problems of a validation failure, or nil.
func (e *AgentError) Problems() []schema.Problem {
	if ve, ok := errors.AsType[*schema.ValidationError](e.Err); ok {
		return ve.Problems
	}
	return nil
}

// KindOf returns the kind of a result's error, or "" for nil.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	if ae, ok := errors.AsType[*AgentError](err); ok {
		return ae.Kind
	}
	return Classify(err, false, false)
}

// ErrAgentTimeout is the cancellation cause of an agent's own timeout
// ([Def.Timeout]).
var ErrAgentTimeout = errors.New("batchagent: agent timeout")

// ErrMaxTurns is the cause of an agent that reached its turn limit
// without a final answer. ErrMaxTurns is this error.
var ErrMaxTurns = errors.New("agent: max turns reached without a final answer")

// ErrStopped is the cause of an agent stopped between turns by a graceful
// stop. agent.ErrStopped is this error.
var ErrStopped = errors.New("agent: stopped between turns")

// ErrCheckpoint is wrapped by the error of a result whose final state could
// not be saved when the engine stops on checkpoint errors: the result is
// not delivered as the agent's outcome (a resumed run would not find it),
// and its kind is [KindCanceled], so a resume runs the input again.
var ErrCheckpoint = errors.New("batchagent: checkpoint save failed")

// Classify maps an agent's failure to its kind. timedOut says the agent's
// own deadline expired; canceled that the run was cancelled.
func Classify(err error, timedOut, canceled bool) Kind {
	var (
		inErr   *InputError
		missing *MissingFieldError
		verr    *schema.ValidationError
	)
	switch {
	case errors.As(err, &inErr):
		return KindInput
	case errors.As(err, &missing):
		return KindTemplate
	case errors.Is(err, ErrPanic):
		return KindPanic
	case timedOut:
		return KindTimeout
	case canceled || errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, llm.ErrTimeout):
		return KindTimeout
	case errors.Is(err, ErrMaxTurns):
		return KindMaxTurns
	case errors.Is(err, llm.ErrTruncated):
		return KindTruncated
	case errors.As(err, &verr):
		return KindValidation
	case errors.Is(err, tool.ErrFatal):
		return KindTool
	case errors.Is(err, llm.ErrRateLimited):
		return KindRateLimit
	default:
		return KindBackend
	}
}
