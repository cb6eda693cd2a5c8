package oaiwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// JSONError says why a JSON text was refused, and where.
type JSONError struct {
	// path locates the fault as a JSONPath ("$.messages[0].role"); "" when
	// the offset alone does. An array index and an object key made of
	// digits read alike.
	path string
	// offset is the byte offset of the fault in the text.
	offset int64
	msg    string
}

func (e *JSONError) Error() string {
	if e.path != "" {
		return fmt.Sprintf("%s at %s (byte offset %d)", e.msg, e.path, e.offset)
	}
	return fmt.Sprintf("%s at byte offset %d", e.msg, e.offset)
}

// Within reports whether the fault lies at or below the member name of
// the top-level object.
func (e *JSONError) Within(name string) bool {
	p := "$." + name
	return e.path == p || strings.HasPrefix(e.path, p+".") || strings.HasPrefix(e.path, p+"[")
}

// CheckJSON returns nil when data is exactly one JSON value (surrounding
// white space aside) that decodes to the same thing in every decoder: no
// object names a key twice, and every string is valid UTF-8 (RFC 7493,
// I-JSON). encoding/json would let the last of two keys win and put
// U+FFFD in place of bad bytes, so that {"model":"a","model":"b"} is
// routed to b; such a text is refused, naming the key with its path or
// the offset of the bad byte.
func CheckJSON(data []byte) *JSONError {
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		e := &JSONError{msg: "not valid JSON: " + err.Error()}
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			e.offset = se.Offset
		} else {
			e.offset = int64(len(data)) // unexpected end of input
		}
		return e
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	err := dec.SkipValue()
	if err == nil {
		if _, err = dec.ReadToken(); errors.Is(err, io.EOF) {
			return nil
		}
	}
	se, ok := errors.AsType[*jsontext.SyntacticError](err)
	if !ok {
		// Unreachable: encoding/json accepted the text, and jsontext
		// reports what else it refuses as syntactic errors.
		return &JSONError{msg: "not valid JSON: " + err.Error()}
	}
	e := &JSONError{path: jsonPath(se.JSONPointer), offset: se.ByteOffset}
	if errors.Is(se.Err, jsontext.ErrDuplicateName) {
		e.msg = fmt.Sprintf("duplicate key %q", se.JSONPointer.LastToken())
		return e
	}
	if off := invalidUTF8(data); off >= 0 {
		// The first error jsontext met: the path is that of the string
		// holding the bad byte.
		e.offset, e.msg = int64(off), fmt.Sprintf("invalid UTF-8 (byte %#02x)", data[off])
		return e
	}
	if e.path == "$" {
		// Unreachable as far as we know: both decoders agree on syntax.
		e.path, e.msg = "", "not valid JSON: "+se.Err.Error()
		return e
	}
	// What else jsontext refuses in a text encoding/json accepts is an
	// escaped lone UTF-16 surrogate ("\ud800"), which no UTF-8 holds.
	e.msg = "invalid UTF-8 (a lone surrogate escape)"
	return e
}

// jsonPath renders a JSON Pointer as a JSONPath: "/a/0/b c" is
// `$.a[0]["b c"]`.
func jsonPath(p jsontext.Pointer) string {
	var b strings.Builder
	b.WriteString("$")
	for tok := range p.Tokens() {
		switch {
		case tok != "" && strings.Trim(tok, "0123456789") == "":
			b.WriteString("[" + tok + "]")
		case plainName(tok):
			b.WriteString("." + tok)
		default:
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
	}
	return b.String()
}

// plainName reports whether k reads as a path segment without quotes.
func plainName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return k != ""
}

// invalidUTF8 returns the offset of the first byte of b that is not part
// of valid UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1 // unreachable: utf8.Valid said otherwise
}

// Param returns the request parameter the fault lies in, for an error
// body's "param": its path without the "$." of the root; "" for the root
// or an offset alone.
func (e *JSONError) Param() string {
	p, _ := strings.CutPrefix(e.path, "$.")
	if p == "$" {
		return ""
	}
	return p
}
