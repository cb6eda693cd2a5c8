package job

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// resultJSON is the JSON form of a Result: one line of the CLI's output.
type resultJSON struct {
	Index      int             `json:"index"`
	Input      Input           `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *ErrorInfo      `json:"error,omitempty"`
	Raw        string          `json:"raw,omitempty"`
	ModelCalls int             `json:"model_calls"`
	Turns      int             `json:"turns"`
	ToolCalls  int             `json:"tool_calls"`
	Repairs    int             `json:"repairs,omitempty"`
	Truncated  int             `json:"truncations,omitempty"`
	Compacted  int             `json:"compactions,omitempty"`
	Usage      llm.Usage       `json:"usage"`
	Timings    timingsJSON     `json:"timings"`
	Tier       int             `json:"tier,omitempty"`
	Packed     int             `json:"packed,omitempty"`
}

// ErrorInfo is the flat, JSON form of an agent's error: what a result line
// and a checkpoint record of it.
type ErrorInfo struct {
	Kind     Kind             `json:"kind"`
	Op       string           `json:"op,omitempty"`
	Turn     int              `json:"turn"`
	Message  string           `json:"message"`
	Class    string           `json:"class,omitempty"`
	Problems []schema.Problem `json:"problems,omitempty"`
}

type timingsJSON struct {
	Queue     float64 `json:"queue_s"`
	Inference float64 `json:"inference_s"`
	Tools     float64 `json:"tools_s"`
	Backoff   float64 `json:"backoff_s,omitempty"`
	TTFT      float64 `json:"ttft_s"`
	Total     float64 `json:"total_s"`
}

// MarshalJSON encodes r as one self-describing JSON object: index, input,
// output or error (kind, step, turn, message, classes and schema
// problems), the raw answer of a failure, counters, usage, timings in
// seconds, and the tier and pack size when set.
func (r Result) MarshalJSON() ([]byte, error) {
	v := resultJSON{
		Index: r.Index, Input: r.Input, Output: r.Output, ModelCalls: r.ModelCalls,
		Turns: r.Turns, ToolCalls: r.ToolCalls, Repairs: r.Repairs, Truncated: r.Truncations, Compacted: r.Compactions,
		Usage: r.Usage, Tier: r.Tier, Packed: r.Packed,
		Timings: timingsJSON{
			Queue: secs(r.Timings.Queue), Inference: secs(r.Timings.Inference),
			Tools: secs(r.Timings.Tools), Backoff: secs(r.Timings.Backoff),
			TTFT: secs(r.Timings.TTFT), Total: secs(r.Timings.Total),
		},
	}
	if r.Err != nil {
		v.Raw = r.Raw
		v.Error = Describe(r.Err)
	}
	return json.Marshal(v)
}

// Describe flattens an agent's error: its kind, failed step, turn (-1 when
// none), message (the cause's, for an *AgentError), classes (the names of
// the sentinel errors it wraps, comma-separated, as [RestoreCause] reads
// them) and schema problems.
func Describe(err error) *ErrorInfo {
	v := &ErrorInfo{Kind: KindOf(err), Turn: -1, Message: err.Error()}
	if ae, ok := errors.AsType[*AgentError](err); ok {
		v.Op, v.Turn, v.Message, v.Problems = ae.Op, ae.Turn, ae.Err.Error(), ae.Problems()
	}
	v.Class = classOf(err)
	return v
}

// secs rounds d to microseconds, in seconds.
func secs(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }
