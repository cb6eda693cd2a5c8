package agent

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// State is one agent's progress: the unit that is checkpointed and
// resumed. The zero value is not runnable: Messages must hold the task.
type State struct {
	// Index is the agent's position in its job's inputs.
	Index int `json:"index"`
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
	// Usage sums the tokens of all model calls.
	Usage llm.Usage `json:"usage"`
	// Timings accumulates where the agent's time went.
	Timings Timings `json:"timings"`
	// Output is the validated final answer (compact JSON), once done.
	Output json.RawMessage `json:"output,omitempty"`
	// Raw is the last final answer's text as the model wrote it.
	Raw string `json:"raw,omitempty"`
}

// Timings says where an agent's time went.
type Timings struct {
	// Queue is time spent waiting for an inference slot.
	Queue time.Duration `json:"queue"`
	// Inference is time spent in model calls, slot held.
	Inference time.Duration `json:"inference"`
	// Tools is time spent waiting for tool calls.
	Tools time.Duration `json:"tools"`
	// Backoff is time spent waiting before retries.
	Backoff time.Duration `json:"backoff"`
	// TTFT is the time from being ready for the first model call (slot
	// wait included) to its first token.
	TTFT time.Duration `json:"ttft"`
}

// Clone returns a deep copy of the conversation and counters of st.
func (st *State) Clone() *State {
	c := *st
	c.Messages = slices.Clone(st.Messages)
	c.Output = slices.Clone(st.Output)
	return &c
}
