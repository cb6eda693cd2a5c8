package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/jsonenc"
	"github.com/batchagent/batchagent/llm"
)

// appendState appends st's JSON and a newline to dst: byte for byte what a
// json.Encoder with SetEscapeHTML(false) writes, without reflection, but
// for one rule: the parts of st's messages that st.Media names are
// written without their bytes (see [agent.State.SavedParts]), so that a state holds
// the path and hash of a task's image, never the image. Every
// agent's final state is encoded once, and at 100 000 agents encoding/json's
// reflection was half of what the store cost the engine. Reading stays with
// encoding/json; TestAppendStateMatchesEncodingJSON fills every field of
// agent.State (new ones included) and holds the two encodings equal.
func appendState(dst []byte, st *agent.State) ([]byte, error) {
	// The parts are functions of their own, so that this frame stays small:
	// an agent's goroutine encodes its final state at the bottom of its
	// deepest call chain, where a larger frame made every agent's stack
	// grow once more (bench scale --state).
	var err error
	if dst, err = appendStateHead(dst, st); err != nil {
		return dst, err
	}
	if dst, err = appendMessages(dst, st); err != nil {
		return dst, err
	}
	if len(st.Media) > 0 {
		if dst, err = appendParts(append(dst, `,"media":`...), st.Media); err != nil {
			return dst, fmt.Errorf("media: %w", err)
		}
	}
	dst = appendCounters(dst, st)
	if dst, err = appendStateTail(dst, st); err != nil {
		return dst, err
	}
	return append(dst, '}', '\n'), nil
}

// appendStateHead writes st's members from "{" to the failure.
//
//go:noinline
func appendStateHead(dst []byte, st *agent.State) ([]byte, error) {
	var err error
	dst = append(dst, '{')
	if st.JobID != "" {
		dst = jsonenc.AppendString(append(dst, `"job_id":`...), st.JobID, false)
		dst = append(dst, ',')
	}
	dst = strconv.AppendInt(append(dst, `"index":`...), int64(st.Index), 10)
	if len(st.Input) > 0 {
		if dst, err = jsonenc.AppendAny(append(dst, `,"input":`...), map[string]any(st.Input), false); err != nil {
			return dst, fmt.Errorf("input: %w", err)
		}
	}
	dst = jsonenc.AppendString(append(dst, `,"status":`...), string(st.Status), false)
	if st.Failure != nil {
		dst = appendFailure(append(dst, `,"failure":`...), st.Failure)
	}
	return dst, nil
}

// appendFailure writes f as encoding/json does.
func appendFailure(dst []byte, f *job.Failure) []byte {
	dst = jsonenc.AppendString(append(dst, `{"kind":`...), string(f.Kind), false)
	dst = appendOptString(dst, `,"op":`, f.Op)
	dst = strconv.AppendInt(append(dst, `,"turn":`...), int64(f.Turn), 10)
	if len(f.Cause) > 0 {
		dst = append(dst, `,"cause":[`...)
		for i, l := range f.Cause {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(append(dst, `{"message":`...), l.Message, false)
			dst = appendOptString(dst, `,"class":`, l.Class)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(f.Problems) > 0 {
		dst = append(dst, `,"problems":[`...)
		for i, p := range f.Problems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(append(dst, `{"path":`...), p.Path, false)
			dst = jsonenc.AppendString(append(dst, `,"message":`...), p.Message, false)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendMessages writes the "messages" member of st.
//
//go:noinline
func appendMessages(dst []byte, st *agent.State) ([]byte, error) {
	var err error
	msgs := st.Messages
	dst = append(dst, `,"messages":`...)
	if msgs == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range msgs {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendMessage(dst, &msgs[i], st); err != nil {
				return dst, fmt.Errorf("messages[%d]: %w", i, err)
			}
		}
		dst = append(dst, ']')
	}
	return dst, nil
}

// appendCounters writes st's members from "turns" to "timings".
//
//go:noinline
func appendCounters(dst []byte, st *agent.State) []byte {
	dst = appendIntField(dst, `,"turns":`, int64(st.Turns))
	dst = appendIntField(dst, `,"model_calls":`, int64(st.ModelCalls))
	dst = appendIntField(dst, `,"retries":`, int64(st.Retries))
	dst = appendIntField(dst, `,"corrections":`, int64(st.Corrections))
	dst = appendIntField(dst, `,"tool_calls":`, int64(st.ToolCalls))
	if st.ToolErrors != 0 {
		dst = appendIntField(dst, `,"tool_errors":`, int64(st.ToolErrors))
	}
	if st.Repairs != 0 {
		dst = appendIntField(dst, `,"repairs":`, int64(st.Repairs))
	}
	if st.Truncations != 0 {
		dst = appendIntField(dst, `,"truncations":`, int64(st.Truncations))
	}
	if st.Compactions != 0 {
		dst = appendIntField(dst, `,"compactions":`, int64(st.Compactions))
	}
	if st.CachedCalls != 0 {
		dst = appendIntField(dst, `,"cached_calls":`, int64(st.CachedCalls))
	}
	if st.SavedTokens != 0 {
		dst = appendIntField(dst, `,"saved_tokens":`, st.SavedTokens)
	}
	if st.MaxTokens != 0 {
		dst = appendIntField(dst, `,"max_tokens":`, int64(st.MaxTokens))
	}
	dst = appendIntField(dst, `,"usage":{"prompt_tokens":`, st.Usage.PromptTokens)
	dst = appendIntField(dst, `,"completion_tokens":`, st.Usage.CompletionTokens)
	if st.Usage.CachedTokens != 0 {
		dst = appendIntField(dst, `,"cached_tokens":`, st.Usage.CachedTokens)
	}
	if st.Usage.CacheWriteTokens != 0 {
		dst = appendIntField(dst, `,"cache_write_tokens":`, st.Usage.CacheWriteTokens)
	}
	if st.Usage.MediaTokens != 0 {
		dst = appendIntField(dst, `,"media_tokens":`, st.Usage.MediaTokens)
	}
	t := &st.Timings
	dst = appendIntField(dst, `},"timings":{"queue":`, int64(t.Queue))
	dst = appendIntField(dst, `,"inference":`, int64(t.Inference))
	dst = appendIntField(dst, `,"tools":`, int64(t.Tools))
	dst = appendIntField(dst, `,"backoff":`, int64(t.Backoff))
	dst = appendIntField(dst, `,"ttft":`, int64(t.TTFT))
	if t.Total != 0 {
		dst = appendIntField(dst, `,"total":`, int64(t.Total))
	}
	dst = append(dst, '}')
	return dst
}

// appendStateTail writes st's members from "output" to "spans".
//
//go:noinline
func appendStateTail(dst []byte, st *agent.State) ([]byte, error) {
	var err error
	if len(st.Output) > 0 {
		if dst, err = jsonenc.AppendRaw(append(dst, `,"output":`...), st.Output, false); err != nil {
			return dst, fmt.Errorf("output: %w", err)
		}
	}
	dst = appendOptString(dst, `,"raw":`, st.Raw)
	if st.Tier != 0 {
		dst = appendIntField(dst, `,"tier":`, int64(st.Tier))
	}
	if st.Packed != 0 {
		dst = appendIntField(dst, `,"packed":`, int64(st.Packed))
	}
	if !st.Started.IsZero() { // omitzero
		if dst, err = appendTime(append(dst, `,"started":`...), st.Started); err != nil {
			return dst, fmt.Errorf("started: %w", err)
		}
	}
	if len(st.Spans) > 0 {
		dst = append(dst, `,"spans":[`...)
		for i := range st.Spans {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendSpan(dst, &st.Spans[i]); err != nil {
				return dst, fmt.Errorf("spans[%d]: %w", i, err)
			}
		}
		dst = append(dst, ']')
	}
	return dst, nil
}

// appendSpan writes sp as encoding/json does.
func appendSpan(dst []byte, sp *job.Span) ([]byte, error) {
	dst = appendIntField(dst, `{"turn":`, int64(sp.Turn))
	var err error
	if dst, err = appendTime(append(dst, `,"start":`...), sp.Start); err != nil {
		return dst, fmt.Errorf("start: %w", err)
	}
	dst = appendIntField(dst, `,"queue":`, int64(sp.Queue))
	dst = appendIntField(dst, `,"inference":`, int64(sp.Inference))
	if sp.TTFT != 0 {
		dst = appendIntField(dst, `,"ttft":`, int64(sp.TTFT))
	}
	if sp.Backoff != 0 {
		dst = appendIntField(dst, `,"backoff":`, int64(sp.Backoff))
	}
	if sp.Tools != 0 {
		dst = appendIntField(dst, `,"tools":`, int64(sp.Tools))
	}
	if sp.Tier != 0 {
		dst = appendIntField(dst, `,"tier":`, int64(sp.Tier))
	}
	return append(dst, '}'), nil
}

// appendTime writes t as encoding/json does through [time.Time.MarshalJSON]:
// RFC 3339 with nanoseconds, in t's own zone, quoted (no character of it
// needs escaping). A time RFC 3339 cannot hold (a year past 9999, say)
// is an error, as it is to encoding/json.
func appendTime(dst []byte, t time.Time) ([]byte, error) {
	out, err := t.AppendText(append(dst, '"'))
	if err != nil {
		return dst, err
	}
	return append(out, '"'), nil
}

func appendIntField(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(dst, key...), v, 10)
}

// appendOptString appends key and s unless s is empty (omitempty).
func appendOptString(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return jsonenc.AppendString(append(dst, key...), s, false)
}

// appendMessage writes m, a message of st, as encoding/json does, but
// for the parts st's task media name (see [agent.State.SavedParts]): those lose their
// bytes.
func appendMessage(dst []byte, m *llm.Message, st *agent.State) ([]byte, error) {
	dst = jsonenc.AppendString(append(dst, `{"role":`...), string(m.Role), false)
	dst = appendOptString(dst, `,"content":`, m.Content)
	if len(m.Parts) > 0 {
		var err error
		if dst, err = appendParts(append(dst, `,"parts":`...), st.SavedParts(m.Parts)); err != nil {
			return dst, fmt.Errorf("parts: %w", err)
		}
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendToolCall(dst, &m.ToolCalls[i]); err != nil {
				return dst, fmt.Errorf("tool_calls[%d]: %w", i, err)
			}
		}
		dst = append(dst, ']')
	}
	dst = appendOptString(dst, `,"tool_call_id":`, m.ToolCallID)
	dst = appendOptString(dst, `,"name":`, m.Name)
	if m.IsError {
		dst = append(dst, `,"is_error":true`...)
	}
	return append(dst, '}'), nil
}

// appendParts writes parts as encoding/json does. Media messages are
// rare: encoding/json writes them (their bytes base64), the text path
// stays hand-written.
func appendParts(dst []byte, parts []llm.Part) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as the hand-written strings
	if err := enc.Encode(parts); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...), nil
}

// appendToolCall writes what [llm.ToolCall.MarshalJSON] does. That method
// marshals with json.Marshal, which escapes HTML characters, and the
// encoder keeps its output as is; so its strings are HTML-escaped here.
func appendToolCall(dst []byte, c *llm.ToolCall) ([]byte, error) {
	dst = jsonenc.AppendString(append(dst, `{"id":`...), c.ID, true)
	dst = jsonenc.AppendString(append(dst, `,"name":`...), c.Name, true)
	if len(c.Arguments) == 0 {
		return append(dst, '}'), nil
	}
	// Invalid JSON (appendRaw's only error: it validates as it compacts)
	// is kept as text, as MarshalJSON keeps it.
	out, err := jsonenc.AppendRaw(append(dst, `,"arguments":`...), c.Arguments, true)
	if err != nil {
		out = jsonenc.AppendString(append(dst, `,"arguments_text":`...), string(c.Arguments), true)
	}
	return append(out, '}'), nil
}
