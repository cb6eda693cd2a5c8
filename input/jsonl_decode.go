package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/batchagent/batchagent/job"
)

// ErrDuplicateKey is wrapped by the *[Error] of a JSONL line whose
// object, or an object nested in it, names the same key twice. Such a line
// is rejected rather than decoded last-wins, so that no value is silently
// dropped.
var ErrDuplicateKey = errors.New("duplicate key")

// ErrInvalidUTF8 is wrapped by the *[Error] of a row holding text that
// is not valid UTF-8: bytes that are not UTF-8 in a JSONL string or a CSV
// field, or a JSON escape of a lone UTF-16 surrogate such as "\ud800". Such
// a row is rejected rather than decoded with U+FFFD in place of the bad
// text.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// maxKeys bounds the object keys a lineDecoder keeps to reuse, so that
// rows with ever new keys do not grow it without end.
const maxKeys = 1024

// lineDecoder decodes JSONL lines with one reused [jsontext.Decoder], which
// rejects duplicate names and invalid UTF-8 (RFC 7493) as it reads. It is
// owned by one JSONL sequence and not safe for concurrent use.
type lineDecoder struct {
	r   bytes.Reader
	dec *jsontext.Decoder
	// keys holds the object keys met so far, each its own key, so that
	// rows naming the same keys, as rows mostly do, share their strings
	// rather than allocate them again on every line.
	keys map[string]string
	buf  []byte // scratch for unquoting a key
}

func newLineDecoder() *lineDecoder {
	ld := &lineDecoder{keys: make(map[string]string)}
	ld.dec = jsontext.NewDecoder(&ld.r)
	return ld
}

// decode decodes line, which is non-empty and trimmed, as one JSON object.
// Values are those encoding/json decodes with UseNumber: numbers stay
// json.Number with their text, so large integers stay exact.
func (ld *lineDecoder) decode(line []byte) (job.Input, error) {
	var jerr error // why jsontext refused the line
	if line[0] == '{' {
		ld.r.Reset(line)
		ld.dec.Reset(&ld.r)
		v, err := ld.value()
		if err == nil {
			if _, err = ld.dec.ReadToken(); errors.Is(err, io.EOF) {
				return v.(map[string]any), nil // value starts with '{': always a map
			}
		}
		jerr = err
	}
	return nil, lineError(line, jerr)
}

// value reads the next JSON value from ld.dec. An error below the top level
// comes back as a *pathError locating it.
func (ld *lineDecoder) value() (any, error) {
	tok, err := ld.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := make(map[string]any)
		for ld.dec.PeekKind() != '}' {
			k, err := ld.key()
			if err != nil {
				return nil, err
			}
			v, err := ld.value()
			if err != nil {
				return nil, within(err, keySegment(k))
			}
			m[k] = v
		}
		if _, err := ld.dec.ReadToken(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		a := make([]any, 0)
		for ld.dec.PeekKind() != ']' {
			v, err := ld.value()
			if err != nil {
				return nil, within(err, "["+strconv.Itoa(len(a))+"]")
			}
			a = append(a, v)
		}
		if _, err := ld.dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	case 'n':
		return nil, nil
	default:
		// Unreachable: ReadToken returns only the kinds above, or an error.
		return nil, fmt.Errorf("unexpected JSON token %v", tok.Kind())
	}
}

// key reads the next object name from ld.dec, reusing the string of a key
// met before.
func (ld *lineDecoder) key() (string, error) {
	raw, err := ld.dec.ReadValue() // a name: checked for duplicates like ReadToken does
	if err != nil {
		return "", err
	}
	name := raw[1 : len(raw)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		if ld.buf, err = jsontext.AppendUnquote(ld.buf[:0], raw); err != nil {
			return "", err // unreachable: ReadValue validated raw
		}
		name = ld.buf
	}
	if k, ok := ld.keys[string(name)]; ok {
		return k, nil
	}
	k := string(name)
	if len(ld.keys) < maxKeys {
		ld.keys[k] = k
	}
	return k, nil
}

// pathError is an error inside a JSON line with the JSONPath-like location
// ("$.a[0]") of the value that holds it, built as value unwinds.
type pathError struct {
	path string // segments below "$", e.g. ".a[0]"
	err  error
}

func (e *pathError) Error() string { return "at $" + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// within prefixes the location of err with seg.
func within(err error, seg string) error {
	if pe, ok := err.(*pathError); ok {
		pe.path = seg + pe.path
		return pe
	}
	return &pathError{path: seg, err: err}
}

// keySegment renders object key k as a path segment: ".name" when k is a
// plain name, else `["k"]` quoted.
func keySegment(k string) string {
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9'
	}
	if plain {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// lineError reports why line is not a single JSON object. jerr is the error
// jsontext gave, if line was read by it. Syntax errors keep the wording of
// encoding/json and wrap its *json.SyntaxError; what encoding/json accepts
// but jsontext refuses (duplicate keys, invalid UTF-8) wraps ErrDuplicateKey
// or ErrInvalidUTF8.
func lineError(line []byte, jerr error) error {
	// Only the syntax is checked, into a RawMessage: decoding into any
	// would turn a number beyond float64's range (1e999), which is valid
	// JSON, into a conversion error hiding the line's real problem.
	if err := json.Unmarshal(line, new(json.RawMessage)); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	var kind string
	switch line[0] { // line is trimmed valid JSON: its first byte tells the kind
	case '{':
		return semanticError(line, jerr)
	case '[':
		kind = "an array"
	case '"':
		kind = "a string"
	case 't', 'f':
		kind = "a boolean"
	case 'n':
		kind = "null"
	default:
		kind = "a number"
	}
	return fmt.Errorf("not a JSON object: found %s", kind)
}

// semanticError describes jerr, the error jsontext gave for line, an object
// that encoding/json accepts.
func semanticError(line []byte, jerr error) error {
	path := "$"
	if pe, ok := jerr.(*pathError); ok {
		path += pe.path
	}
	var se *jsontext.SyntacticError
	if !errors.As(jerr, &se) {
		// Unreachable: encoding/json and jsontext agree on syntax.
		return fmt.Errorf("invalid JSON: %v", jerr)
	}
	if errors.Is(se.Err, jsontext.ErrDuplicateName) {
		key := se.JSONPointer.LastToken()
		if path == "$" {
			return fmt.Errorf("%w %q", ErrDuplicateKey, key)
		}
		return fmt.Errorf("%w %q at %s", ErrDuplicateKey, key, path+keySegment(key))
	}
	if off := invalidUTF8(line); off >= 0 {
		return fmt.Errorf("%w: byte %#02x at column %d", ErrInvalidUTF8, line[off], off+1)
	}
	if esc := loneSurrogate(line); esc != "" {
		return fmt.Errorf("%w: lone surrogate escape %s in a string at %s", ErrInvalidUTF8, esc, path)
	}
	// Unreachable as far as we know: jsontext refuses only the above where
	// encoding/json accepts.
	return fmt.Errorf("invalid JSON at %s: %v", path, se.Err)
}

// invalidUTF8 returns the offset of the first byte of b that is not part of
// valid UTF-8, or -1.
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

// loneSurrogate returns the first \uXXXX escape of a lone UTF-16 surrogate
// in line, which is valid JSON syntax, as written, or "" if there is none.
// Backslashes occur only in escapes there; each escape is skipped whole so
// that `\\ud800` (a backslash, then text) does not count.
func loneSurrogate(line []byte) string {
	for i := 0; i+1 < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		if line[i+1] != 'u' || i+6 > len(line) {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		v, err := strconv.ParseUint(string(line[i+2:i+6]), 16, 16)
		switch {
		case err != nil || v < 0xD800 || v > 0xDFFF:
		case v < 0xDC00 && i+12 <= len(line) && line[i+6] == '\\' && line[i+7] == 'u':
			w, err := strconv.ParseUint(string(line[i+8:i+12]), 16, 16)
			if err == nil && w >= 0xDC00 && w <= 0xDFFF {
				i += 6 // a valid pair
				break
			}
			return string(line[i : i+6])
		default:
			return string(line[i : i+6])
		}
		i += 5
	}
	return ""
}
