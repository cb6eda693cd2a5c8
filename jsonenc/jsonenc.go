// Package jsonenc appends JSON byte for byte as encoding/json writes it,
// without reflection: strings, floats, raw messages and the values an input
// decodes into. The checkpoint store and result lines encode one record per
// agent with it; at 100,000 agents encoding/json's reflection was a large
// share of the engine's CPU time. Each function says which encoding/json
// behaviour it reproduces; the callers' tests hold the two equal.
//
// It is a public leaf (it imports only the standard library) so that job,
// the public vocabulary of jobs and results, encodes its result lines
// without importing an internal package; what it offers is the small set
// of appenders those encoders need, nothing more.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendRaw appends the JSON text raw compacted, as encoding/json embeds a
// json.RawMessage; with html, <, >, &, U+2028 and U+2029 in strings are
// escaped too. When raw is not valid JSON it returns dst as it was and the
// syntax error.
func AppendRaw(dst []byte, raw []byte, html bool) ([]byte, error) {
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

// AppendAny appends the JSON of a value decoded from an input: the types
// encoding/json decodes into (json.Number and float64 for numbers) and the
// plain Go types a YAML or CSV reader yields, map keys sorted; with html,
// strings are escaped as json.Marshal escapes them. Others go through
// encoding/json.
func AppendAny(dst []byte, v any, html bool) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendString(dst, v, html), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number:
		if v == "" {
			return append(dst, '0'), nil
		}
		if !IsValidNumber(string(v)) {
			return dst, fmt.Errorf("invalid number literal %q", string(v))
		}
		return append(dst, v...), nil
	case float64:
		return AppendFloat(dst, v)
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case map[string]any:
		return appendMap(dst, v, html)
	case []any:
		return appendSlice(dst, v, html)
	}
	return appendOther(dst, v, html)
}

// The cases of AppendAny that need room are functions of their own, so
// that AppendAny's frame stays small: it runs on an agent's goroutine, at
// the bottom of its deepest call chain (checkpoint states, result lines),
// where a larger frame made every agent's stack grow once more.

// appendMap appends m with its keys sorted, as encoding/json does.
//
//go:noinline
func appendMap(dst []byte, m map[string]any, html bool) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(AppendString(dst, k, html), ':')
		var err error
		if dst, err = AppendAny(dst, m[k], html); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendSlice appends s as a JSON array.
//
//go:noinline
func appendSlice(dst []byte, s []any, html bool) ([]byte, error) {
	if s == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, e := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = AppendAny(dst, e, html); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// appendOther appends v through encoding/json.
//
//go:noinline
func appendOther(dst []byte, v any, html bool) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // Encode's newline
}

// AppendFloat formats f as encoding/json does: shortest representation,
// exponent form outside [1e-6, 1e21), no NaN or infinity.
func AppendFloat(dst []byte, f float64) ([]byte, error) {
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

// IsValidNumber reports whether s is a JSON number literal.
func IsValidNumber(s string) bool {
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

// plainSafe and htmlSafe hold the bytes AppendString copies as they are:
// ASCII but control characters, quote and backslash; htmlSafe also leaves
// out <, > and &.
var plainSafe, htmlSafe = func() (plain, html [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		html[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, html
}()

// AppendString appends s as a JSON string as encoding/json writes it:
// control characters, quote and backslash escaped, invalid UTF-8 replaced
// by U+FFFD, U+2028 and U+2029 escaped; with html, <, > and & too.
func AppendString(dst []byte, s string, html bool) []byte {
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
