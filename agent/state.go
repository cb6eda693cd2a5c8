package agent

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// State is one agent's progress: the unit that is checkpointed and
// resumed. The zero value is not runnable: Messages must hold the task.
type State struct {
	// JobID names the job the agent belongs to.
	JobID string `json:"job_id,omitempty"`
	// Index is the agent's position in its job's inputs.
	Index int `json:"index"`
	// Input is the agent's input.
	Input job.Input `json:"input,omitempty"`
	// Status is where the agent stands: running, done or failed.
	Status Status `json:"status"`
	// ErrKind and ErrMsg describe the failure of a failed agent.
	ErrKind string `json:"err_kind,omitempty"`
	ErrMsg  string `json:"err_msg,omitempty"`
	// ErrOp and ErrTurn are the failed step and its 0-based turn.
	ErrOp   string `json:"err_op,omitempty"`
	ErrTurn int    `json:"err_turn,omitempty"`
	// ErrClass names the classes of the failure's cause, joined by commas
	// ("rate_limited", "validation", "backend_unavailable,rate_limited"),
	// so that a restored cause answers errors.Is and errors.As as the
	// original did. The engine fills it; "" for none known.
	ErrClass string `json:"err_class,omitempty"`
	// Problems are the schema problems of a validation failure.
	Problems []schema.Problem `json:"problems,omitempty"`
	// Messages is the conversation without the shared prefix.
	Messages []llm.Message `json:"messages"`
	// Turns counts completed model turns.
	Turns int `json:"turns"`
	// ModelCalls counts model call attempts, retries included.
	ModelCalls int `json:"model_calls"`
	// Retries counts model calls retried after transient errors.
	Retries int `json:"retries"`
	// Corrections counts invalid answers sent back for correction.
	Corrections int `json:"corrections"`
	// ToolCalls counts tool calls requested by the model.
	ToolCalls int `json:"tool_calls"`
	// Repairs counts fixes made to broken JSON answers (a trailing comma,
	// a fence, brackets left open by a cut-off answer).
	Repairs int `json:"repairs,omitempty"`
	// Truncations counts answers cut off at the token cap (finish reason
	// length), each asked again or, the last, failed.
	Truncations int `json:"truncations,omitempty"`
	// Compactions counts the times the conversation was compacted to fit
	// the model's context window: older tool results shortened, older
	// turns dropped (see Config.ContextWindow).
	Compactions int `json:"compactions,omitempty"`
	// MaxTokens is the token cap raised after a truncated answer, used by
	// the agent's later calls, kept between the configured MaxTokens and
	// MaxTokensLimit; zero means the configured one.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Usage sums the tokens of all model calls.
	Usage llm.Usage `json:"usage"`
	// Timings accumulates where the agent's time went.
	Timings Timings `json:"timings"`
	// Output is the validated final answer (compact JSON), once done.
	Output json.RawMessage `json:"output,omitempty"`
	// Raw is the last final answer's text as the model wrote it.
	Raw string `json:"raw,omitempty"`
	// Tier is the fallback tier that answered a finished agent (0: the
	// job's model), and Packed the agents of the packed call that
	// answered it (0: none); set by the engine with the final state.
	Tier   int `json:"tier,omitempty"`
	Packed int `json:"packed,omitempty"`
	// Started is when the agent began in its latest run (the engine sets
	// it as the agent starts or resumes); zero when unknown, as in states
	// saved before it was recorded.
	Started time.Time `json:"started,omitzero"`
	// Spans are the agent's model turns as they ran, in order: Run
	// appends one per model turn, a failed one included, up to
	// job.MaxSpans, and a resumed agent keeps those of its earlier runs.
	Spans []job.Span `json:"spans,omitempty"`
}

// Status is where an agent stands.
type Status string

// The statuses of an agent.
const (
	StatusRunning Status = "running" // turns in progress; resumable from Messages
	StatusDone    Status = "done"    // finished with a valid output
	StatusFailed  Status = "failed"  // finished with an error
)

// Timings says where an agent's time went.
type Timings struct {
	// Queue is time spent waiting for an inference slot.
	Queue time.Duration `json:"queue"`
	// Inference is time spent in model calls, slot held.
	Inference time.Duration `json:"inference"`
	// Tools is time spent on tool calls: per turn, from the first call's
	// start to the last one's end. Calls that start while the answer
	// still streams make it overlap Inference.
	Tools time.Duration `json:"tools"`
	// Backoff is time spent waiting before retries.
	Backoff time.Duration `json:"backoff"`
	// TTFT is the time from being ready for the first model call (slot
	// wait included) to its first token.
	TTFT time.Duration `json:"ttft"`
	// Total is the agent's wall time in the run that finished it, set by
	// the engine with its final state. Zero while the agent runs.
	Total time.Duration `json:"total,omitempty"`
}

// Clone returns a deep copy of the conversation and counters of st.
func (st *State) Clone() *State {
	c := *st
	c.Messages = slices.Clone(st.Messages)
	c.Output = slices.Clone(st.Output)
	c.Problems = slices.Clone(st.Problems)
	c.Spans = slices.Clone(st.Spans)
	return &c
}
