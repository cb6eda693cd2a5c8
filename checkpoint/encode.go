package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// appendState appends st's JSON and a newline to dst: byte for byte what a
// json.Encoder with SetEscapeHTML(false) writes, without reflection. Every
// agent's final state is encoded once, and at 100 000 agents encoding/json's
// reflection was half of what the store cost the engine. Reading stays with
// encoding/json; TestAppendStateMatchesEncodingJSON fills every field of
// agent.State (new ones included) and holds the two encodings equal.
func appendState(dst []byte, st *agent.State) ([]byte, error) {
	var err error
	dst = append(dst, '{')
	if st.JobID != "" {
		dst = appendString(append(dst, `"job_id":`...), st.JobID, false)
		dst = append(dst, ',')
	}
	dst = strconv.AppendInt(append(dst, `"index":`...), int64(st.Index), 10)
	if len(st.Input) > 0 {
		if dst, err = appendAny(append(dst, `,"input":`...), map[string]any(st.Input)); err != nil {
			return dst, fmt.Errorf("input: %w", err)
		}
	}
	dst = appendString(append(dst, `,"status":`...), string(st.Status), false)
	dst = appendOptString(dst, `,"err_kind":`, st.ErrKind)
	dst = appendOptString(dst, `,"err_msg":`, st.ErrMsg)
	dst = appendOptString(dst, `,"err_op":`, st.ErrOp)
	if st.ErrTurn != 0 {
		dst = strconv.AppendInt(append(dst, `,"err_turn":`...), int64(st.ErrTurn), 10)
	}
	dst = appendOptString(dst, `,"err_class":`, st.ErrClass)
	if len(st.Problems) > 0 {
		dst = append(dst, `,"problems":[`...)
		for i, p := range st.Problems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(append(dst, `{"path":`...), p.Path, false)
			dst = appendString(append(dst, `,"message":`...), p.Message, false)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"messages":`...)
	if st.Messages == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range st.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendMessage(dst, &st.Messages[i]); err != nil {
				return dst, fmt.Errorf("messages[%d]: %w", i, err)
			}
		}
		dst = append(dst, ']')
	}
	dst = appendIntField(dst, `,"turns":`, int64(st.Turns))
	dst = appendIntField(dst, `,"model_calls":`, int64(st.ModelCalls))
	dst = appendIntField(dst, `,"retries":`, int64(st.Retries))
	dst = appendIntField(dst, `,"corrections":`, int64(st.Corrections))
	dst = appendIntField(dst, `,"tool_calls":`, int64(st.ToolCalls))
	if st.Repairs != 0 {
		dst = appendIntField(dst, `,"repairs":`, int64(st.Repairs))
	}
	if st.Truncations != 0 {
		dst = appendIntField(dst, `,"truncations":`, int64(st.Truncations))
	}
	if st.Compactions != 0 {
		dst = appendIntField(dst, `,"compactions":`, int64(st.Compactions))
	}
	if st.MaxTokens != 0 {
		dst = appendIntField(dst, `,"max_tokens":`, int64(st.MaxTokens))
	}
	dst = appendIntField(dst, `,"usage":{"prompt_tokens":`, st.Usage.PromptTokens)
	dst = appendIntField(dst, `,"completion_tokens":`, st.Usage.CompletionTokens)
	if st.Usage.CachedTokens != 0 {
		dst = appendIntField(dst, `,"cached_tokens":`, st.Usage.CachedTokens)
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
	if len(st.Output) > 0 {
		if dst, err = appendRaw(append(dst, `,"output":`...), st.Output, false); err != nil {
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
	return append(dst, '}', '\n'), nil
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
	return appendString(append(dst, key...), s, false)
}

func appendMessage(dst []byte, m *llm.Message) ([]byte, error) {
	dst = appendString(append(dst, `{"role":`...), string(m.Role), false)
	dst = appendOptString(dst, `,"content":`, m.Content)
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

// appendToolCall writes what [llm.ToolCall.MarshalJSON] does. That method
// marshals with json.Marshal, which escapes HTML characters, and the
// encoder keeps its output as is; so its strings are HTML-escaped here.
func appendToolCall(dst []byte, c *llm.ToolCall) ([]byte, error) {
	dst = appendString(append(dst, `{"id":`...), c.ID, true)
	dst = appendString(append(dst, `,"name":`...), c.Name, true)
	if len(c.Arguments) == 0 {
		return append(dst, '}'), nil
	}
	// Invalid JSON (appendRaw's only error: it validates as it compacts)
	// is kept as text, as MarshalJSON keeps it.
	out, err := appendRaw(append(dst, `,"arguments":`...), c.Arguments, true)
	if err != nil {
		out = appendString(append(dst, `,"arguments_text":`...), string(c.Arguments), true)
	}
	return append(out, '}'), nil
}

// appendRaw appends the JSON text raw compacted, as encoding/json embeds a
// json.RawMessage; with html, <, >, &, U+2028 and U+2029 in strings are
// escaped too. When raw is not valid JSON it returns dst as it was and the
// syntax error.
func appendRaw(dst []byte, raw []byte, html bool) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, err
	}
	compact := buf.Bytes()[len(dst):]
	if !html || !needsHTMLEscape(compact) {
		return buf.Bytes(), nil
	}
	compact = slices.Clone(compact)
	buf.Truncate(len(dst))
	json.HTMLEscape(buf, compact)
	return buf.Bytes(), nil
}

// needsHTMLEscape reports whether json.HTMLEscape would change b: whether
// it holds <, > or &, or the first byte of U+2028 or U+2029.
func needsHTMLEscape(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

// appendAny appends the JSON of a value decoded from an input: the types
// encoding/json decodes into (json.Number and float64 for numbers) and the
// plain Go types a YAML or CSV reader yields. Others go through
// encoding/json.
func appendAny(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, v, false), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number:
		if v == "" {
			return append(dst, '0'), nil
		}
		if !isValidNumber(string(v)) {
			return dst, fmt.Errorf("invalid number literal %q", string(v))
		}
		return append(dst, v...), nil
	case float64:
		return appendFloat(dst, v)
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendString(dst, k, false), ':')
			var err error
			if dst, err = appendAny(dst, v[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendAny(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // Encode's newline
}

// appendFloat formats f as encoding/json does: shortest representation,
// exponent form outside [1e-6, 1e21), no NaN or infinity.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, fmt.Errorf("unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// isValidNumber reports whether s is a JSON number literal.
func isValidNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		if s = s[1:]; s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = skipDigits(s[1:])
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && isDigit(s[1]) {
		s = skipDigits(s[2:])
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			if s = s[1:]; s == "" {
				return false
			}
		}
		if !isDigit(s[0]) {
			return false
		}
		s = skipDigits(s[1:])
	}
	return s == ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(s string) string {
	for s != "" && isDigit(s[0]) {
		s = s[1:]
	}
	return s
}

const hexDigits = "0123456789abcdef"

// plainSafe and htmlSafe hold the bytes appendString copies as they are:
// ASCII but control characters, quote and backslash; htmlSafe also leaves
// out <, > and &.
var plainSafe, htmlSafe = func() (plain, html [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		html[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, html
}()

// appendString appends s as a JSON string as encoding/json writes it:
// control characters, quote and backslash escaped, invalid UTF-8 replaced
// by U+FFFD, U+2028 and U+2029 escaped; with html, <, > and & too.
func appendString(dst []byte, s string, html bool) []byte {
	dst = append(dst, '"')
	start := 0
	safe := &plainSafe
	if html {
		safe = &htmlSafe
	}
	for i := 0; i < len(s); {
		c := s[i]
		if safe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
