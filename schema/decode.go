package schema

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeValid decodes s, which must be valid JSON (json.Valid), into the
// values encoding/json produces with UseNumber: map[string]any, []any,
// string, json.Number, bool and nil. It exists because it is several times
// faster than a json.Decoder on the small documents of the hot path: member
// names, strings and numbers are substrings of s, not copies.
//
// Strings that hold escapes or invalid UTF-8 are decoded by encoding/json, so
// the result is exactly what json.Unmarshal gives.
func decodeValid(s string) any {
	d := decoder{s: s}
	return d.value()
}

type decoder struct {
	s string
	i int
}

func (d *decoder) skipSpace() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value() any {
	d.skipSpace()
	if d.i >= len(d.s) {
		return nil
	}
	switch c := d.s[d.i]; c {
	case '{':
		d.i++
		m := make(map[string]any)
		d.skipSpace()
		if d.i < len(d.s) && d.s[d.i] == '}' {
			d.i++
			return m
		}
		for d.i < len(d.s) {
			d.skipSpace()
			k := d.str()
			d.skipSpace()
			d.i++ // ':'
			m[k] = d.value()
			d.skipSpace()
			if d.i >= len(d.s) || d.s[d.i] == '}' {
				d.i++
				break
			}
			d.i++ // ','
		}
		return m
	case '[':
		d.i++
		a := []any{}
		d.skipSpace()
		if d.i < len(d.s) && d.s[d.i] == ']' {
			d.i++
			return a
		}
		for d.i < len(d.s) {
			a = append(a, d.value())
			d.skipSpace()
			if d.i >= len(d.s) || d.s[d.i] == ']' {
				d.i++
				break
			}
			d.i++ // ','
		}
		return a
	case '"':
		return d.str()
	case 't':
		d.i += len("true")
		return true
	case 'f':
		d.i += len("false")
		return false
	case 'n':
		d.i += len("null")
		return nil
	default:
		start := d.i
		for d.i < len(d.s) {
			switch d.s[d.i] {
			case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				d.i++
				continue
			}
			break
		}
		return json.Number(d.s[start:d.i])
	}
}

// str decodes the string literal at d.i.
func (d *decoder) str() string {
	start := d.i
	d.i++ // opening quote
	escapes, nonASCII := false, false
	for d.i < len(d.s) && d.s[d.i] != '"' {
		switch c := d.s[d.i]; {
		case c == '\\':
			escapes = true
			d.i++ // the escaped byte cannot end the string
		case c >= utf8.RuneSelf:
			nonASCII = true
		}
		d.i++
	}
	if d.i >= len(d.s) {
		return "" // unreachable for valid JSON
	}
	d.i++ // closing quote
	lit := d.s[start:d.i]
	inner := lit[1 : len(lit)-1]
	if !escapes && (!nonASCII || utf8.ValidString(inner)) {
		return inner
	}
	// Escapes, or invalid UTF-8 that encoding/json replaces with U+FFFD.
	var out string
	if err := json.Unmarshal([]byte(lit), &out); err != nil {
		return "" // unreachable for valid JSON
	}
	return out
}

// compactInPlace removes the insignificant white space of the valid JSON in b,
// as json.Compact does, reusing b's storage, and returns the shortened slice.
func compactInPlace(b []byte) []byte {
	w := 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		} else {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inString = true
			}
		}
		b[w] = c
		w++
	}
	return b[:w]
}
