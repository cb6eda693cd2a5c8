package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batchagent/batchagent/jsonenc"
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
	ToolErrors int             `json:"tool_errors,omitempty"`
	Repairs    int             `json:"repairs,omitempty"`
	Truncated  int             `json:"truncations,omitempty"`
	Compacted  int             `json:"compactions,omitempty"`
	Usage      llm.Usage       `json:"usage"`
	Timings    timingsJSON     `json:"timings"`
	Tier       int             `json:"tier,omitempty"`
	Packed     int             `json:"packed,omitempty"`
	Cached     int             `json:"cached_calls,omitempty"`
	Saved      int64           `json:"saved_tokens,omitempty"`
}

// ErrorInfo is the flat, JSON form of an agent's error: what a result line
// records of it. A checkpoint keeps it as a [Failure].
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
// seconds, and the tier, pack size and cached calls and tokens saved
// when set.
func (r Result) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(nil)
}

// AppendJSON appends what [Result.MarshalJSON] returns to dst, byte for
// byte, without reflection: one result line is written per agent, and at
// 100,000 agents encoding/json's reflection was a tenth of the engine's
// CPU time. On error it returns dst as it was. TestResultAppendJSON holds
// the two encodings equal on every field.
func (r *Result) AppendJSON(dst []byte) ([]byte, error) {
	if r.Err != nil {
		// Failures are few and carry schema problems and classes: they
		// take encoding/json's path.
		return appendJSONValue(dst, r.jsonValue())
	}
	out := strconv.AppendInt(append(dst, `{"index":`...), int64(r.Index), 10)
	var err error
	if len(r.Input) > 0 {
		if out, err = jsonenc.AppendAny(append(out, `,"input":`...), map[string]any(r.Input), true); err != nil {
			return dst, fmt.Errorf("json: input: %w", err)
		}
	}
	if len(r.Output) > 0 {
		if out, err = jsonenc.AppendRaw(append(out, `,"output":`...), r.Output, true); err != nil {
			return dst, fmt.Errorf("json: output: %w", err)
		}
	}
	out = strconv.AppendInt(append(out, `,"model_calls":`...), int64(r.ModelCalls), 10)
	out = strconv.AppendInt(append(out, `,"turns":`...), int64(r.Turns), 10)
	out = strconv.AppendInt(append(out, `,"tool_calls":`...), int64(r.ToolCalls), 10)
	out = appendOptInt(out, `,"tool_errors":`, r.ToolErrors)
	out = appendOptInt(out, `,"repairs":`, r.Repairs)
	out = appendOptInt(out, `,"truncations":`, r.Truncations)
	out = appendOptInt(out, `,"compactions":`, r.Compactions)
	out = strconv.AppendInt(append(out, `,"usage":{"prompt_tokens":`...), r.Usage.PromptTokens, 10)
	out = strconv.AppendInt(append(out, `,"completion_tokens":`...), r.Usage.CompletionTokens, 10)
	if r.Usage.CachedTokens != 0 {
		out = strconv.AppendInt(append(out, `,"cached_tokens":`...), r.Usage.CachedTokens, 10)
	}
	if r.Usage.CacheWriteTokens != 0 {
		out = strconv.AppendInt(append(out, `,"cache_write_tokens":`...), r.Usage.CacheWriteTokens, 10)
	}
	if r.Usage.MediaTokens != 0 {
		out = strconv.AppendInt(append(out, `,"media_tokens":`...), r.Usage.MediaTokens, 10)
	}
	t := &r.Timings
	out = appendSecs(append(out, `},"timings":{"queue_s":`...), t.Queue)
	out = appendSecs(append(out, `,"inference_s":`...), t.Inference)
	out = appendSecs(append(out, `,"tools_s":`...), t.Tools)
	if secs(t.Backoff) != 0 {
		out = appendSecs(append(out, `,"backoff_s":`...), t.Backoff)
	}
	out = appendSecs(append(out, `,"ttft_s":`...), t.TTFT)
	out = appendSecs(append(out, `,"total_s":`...), t.Total)
	out = append(out, '}')
	out = appendOptInt(out, `,"tier":`, r.Tier)
	out = appendOptInt(out, `,"packed":`, r.Packed)
	out = appendOptInt(out, `,"cached_calls":`, r.CachedCalls)
	if r.SavedTokens != 0 {
		out = strconv.AppendInt(append(out, `,"saved_tokens":`...), r.SavedTokens, 10)
	}
	return append(out, '}'), nil
}

// jsonValue is r's JSON form for encoding/json.
func (r *Result) jsonValue() *resultJSON {
	v := &resultJSON{
		Index: r.Index, Input: r.Input, Output: r.Output, ModelCalls: r.ModelCalls,
		Turns: r.Turns, ToolCalls: r.ToolCalls, ToolErrors: r.ToolErrors, Repairs: r.Repairs, Truncated: r.Truncations, Compacted: r.Compactions,
		Usage: r.Usage, Tier: r.Tier, Packed: r.Packed, Cached: r.CachedCalls, Saved: r.SavedTokens,
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
	return v
}

// appendJSONValue appends json.Marshal(v) to dst.
func appendJSONValue(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendOptInt appends key and v unless v is zero (omitempty).
func appendOptInt(dst []byte, key string, v int) []byte {
	if v == 0 {
		return dst
	}
	return strconv.AppendInt(append(dst, key...), int64(v), 10)
}

// appendSecs appends secs(d) as encoding/json writes a float64.
func appendSecs(dst []byte, d time.Duration) []byte {
	out, _ := jsonenc.AppendFloat(dst, secs(d)) // finite: cannot fail
	return out
}

// Describe flattens an agent's error: its kind, failed step, turn (-1 when
// none), message (the cause's, for an *AgentError), classes (the names of
// the sentinel errors it wraps, comma-separated, as [Link].Class holds
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
