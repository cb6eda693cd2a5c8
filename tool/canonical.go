package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"unicode/utf8"
)

// Canonical arguments.
//
// The canonical form of an arguments object is what encoding/json produces
// when it decodes the object with UseNumber and encodes the result again with
// HTML escaping off: no insignificant whitespace, object keys sorted
// bytewise, duplicate keys resolved to the last value, numbers kept verbatim,
// strings re-escaped. [referenceCanonical] computes exactly that and is the
// definition. [appendCanonical] is a single pass, nearly allocation-free
// rewrite of it for the inputs models actually send (compact or indented
// objects, keys in any order, ordinary escapes); anything else falls back to
// the reference. FuzzCanonicalArgs checks that the two agree.

// maxFastDepth bounds the nesting the fast path handles, and so its
// recursion; deeper inputs go to the reference path.
const maxFastDepth = 32

// canonicalArgs appends the canonical form of the arguments object src to
// dst. Empty or all-blank src stands for the empty object {}: some models send
// nothing for a tool without parameters. The error describes why src is not
// a JSON object.
func canonicalArgs(dst, src []byte) ([]byte, error) {
	if isBlank(src) {
		return append(dst, "{}"...), nil
	}
	if out, ok := appendCanonical(dst, src); ok {
		return out, nil
	}
	canon, err := referenceCanonical(src)
	if err != nil {
		return dst, err
	}
	return append(dst, canon...), nil
}

// isBlank reports whether src is empty or only JSON whitespace.
func isBlank(src []byte) bool {
	for _, b := range src {
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return false
		}
	}
	return true
}

// referenceCanonical is the definition of the canonical form; see the
// comment at the top of this file.
func referenceCanonical(src []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no JSON value")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the arguments object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, not %s", jsonKind(v))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// member locates one member of an object being canonicalised: its key in the
// source and its canonical text ("key":value) in the output.
type member struct {
	keyStart, keyEnd int // in canonicalizer.src, between the quotes
	start, end       int // in the output
}

// canonicalizer is the state of one appendCanonical pass.
type canonicalizer struct {
	src     []byte
	pos     int
	members []member // stack shared by the nested objects being parsed
	scratch []byte   // reordering buffer for objects with unsorted keys
}

// canonicalizers recycles canonicalizer state (its member stack and scratch
// buffer) between calls; oversized state is dropped.
var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

// appendCanonical appends the canonical form of the JSON object src to dst.
// It reports false, leaving the work to referenceCanonical, for inputs outside
// its subset: syntax errors, duplicate keys, \u escapes, escaped keys, control
// characters, invalid UTF-8, U+2028 and U+2029, nesting deeper than
// maxFastDepth. In that case the returned slice is to be ignored.
func appendCanonical(dst, src []byte) ([]byte, bool) {
	c := canonicalizers.Get().(*canonicalizer)
	defer func() {
		c.src = nil
		if cap(c.members) <= 1024 && cap(c.scratch) <= 64<<10 {
			canonicalizers.Put(c)
		}
	}()
	c.src, c.pos, c.members = src, 0, c.members[:0]
	c.skipSpace()
	if c.pos >= len(src) || src[c.pos] != '{' {
		return dst, false
	}
	dst, ok := c.object(dst, 0)
	if !ok {
		return dst, false
	}
	c.skipSpace()
	return dst, c.pos == len(src)
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at c.pos.
func (c *canonicalizer) value(dst []byte, depth int) ([]byte, bool) {
	if c.pos >= len(c.src) {
		return dst, false
	}
	switch b := c.src[c.pos]; {
	case b == '{':
		return c.object(dst, depth+1)
	case b == '[':
		return c.array(dst, depth+1)
	case b == '"':
		return c.string(dst)
	case b == 't':
		return c.literal(dst, "true")
	case b == 'f':
		return c.literal(dst, "false")
	case b == 'n':
		return c.literal(dst, "null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number(dst)
	}
	return dst, false
}

func (c *canonicalizer) literal(dst []byte, lit string) ([]byte, bool) {
	if !bytes.HasPrefix(c.src[c.pos:], []byte(lit)) {
		return dst, false
	}
	c.pos += len(lit)
	return append(dst, lit...), true
}

// number copies a number that follows the JSON grammar; json.Number keeps
// its text verbatim.
func (c *canonicalizer) number(dst []byte) ([]byte, bool) {
	s, i := c.src, c.pos
	digits := func() bool {
		start := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return dst, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return dst, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return dst, false
		}
	}
	dst = append(dst, s[c.pos:i]...)
	c.pos = i
	return dst, true
}

// string copies the string at c.pos. The escapes \" \\ \n \r \t \b \f are
// already canonical; \/ becomes /. Anything the encoder would write
// differently sends the input to the reference path.
func (c *canonicalizer) string(dst []byte) ([]byte, bool) {
	s := c.src
	i := c.pos + 1
	start := c.pos // copy the opening quote along with the first run
	for i < len(s) {
		switch b := s[i]; {
		case b == '"':
			dst = append(dst, s[start:i+1]...)
			c.pos = i + 1
			return dst, true
		case b == '\\':
			if i+1 >= len(s) {
				return dst, false
			}
			switch s[i+1] {
			case '"', '\\', 'n', 'r', 't', 'b', 'f':
				i += 2
			case '/':
				dst = append(dst, s[start:i]...)
				dst = append(dst, '/')
				i += 2
				start = i
			default:
				return dst, false
			}
		case b < 0x20:
			return dst, false
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return dst, false
			}
			i += size
		}
	}
	return dst, false
}

// key scans an object key at c.pos, which must be a string without escapes
// whose bytes are therefore its value, and returns its bounds.
func (c *canonicalizer) key() (start, end int, ok bool) {
	s := c.src
	if c.pos >= len(s) || s[c.pos] != '"' {
		return 0, 0, false
	}
	start = c.pos + 1
	for i := start; i < len(s); {
		switch b := s[i]; {
		case b == '"':
			c.pos = i + 1
			return start, i, true
		case b == '\\' || b < 0x20:
			return 0, 0, false
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0, 0, false
			}
			i += size
		}
	}
	return 0, 0, false
}

func (c *canonicalizer) array(dst []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, false
	}
	c.pos++ // [
	dst = append(dst, '[')
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		return append(dst, ']'), true
	}
	for {
		c.skipSpace()
		var ok bool
		if dst, ok = c.value(dst, depth); !ok {
			return dst, false
		}
		c.skipSpace()
		if c.pos >= len(c.src) {
			return dst, false
		}
		switch c.src[c.pos] {
		case ',':
			c.pos++
			dst = append(dst, ',')
		case ']':
			c.pos++
			return append(dst, ']'), true
		default:
			return dst, false
		}
	}
}

func (c *canonicalizer) object(dst []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, false
	}
	c.pos++ // {
	dst = append(dst, '{')
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
		return append(dst, '}'), true
	}
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	sorted := true
	for {
		c.skipSpace()
		quote := c.pos
		ks, ke, ok := c.key()
		if !ok {
			return dst, false
		}
		if n := len(c.members); n > base {
			prev := c.members[n-1]
			switch bytes.Compare(c.src[prev.keyStart:prev.keyEnd], c.src[ks:ke]) {
			case 0:
				return dst, false // duplicate key: the reference keeps the last
			case 1:
				sorted = false
			}
		}
		start := len(dst)
		dst = append(dst, c.src[quote:c.pos]...)
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != ':' {
			return dst, false
		}
		c.pos++
		dst = append(dst, ':')
		c.skipSpace()
		if dst, ok = c.value(dst, depth); !ok {
			return dst, false
		}
		c.members = append(c.members, member{keyStart: ks, keyEnd: ke, start: start, end: len(dst)})
		c.skipSpace()
		if c.pos < len(c.src) && c.src[c.pos] == '}' {
			c.pos++
			break
		}
		if c.pos >= len(c.src) || c.src[c.pos] != ',' {
			return dst, false
		}
		c.pos++
		dst = append(dst, ',')
	}
	if !sorted {
		var ok bool
		if dst, ok = c.reorder(dst, c.members[base:]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// reorder rewrites the members of an object, which end dst, in key order.
func (c *canonicalizer) reorder(dst []byte, ms []member) ([]byte, bool) {
	first := ms[0].start // members were appended in source order
	key := func(m member) []byte { return c.src[m.keyStart:m.keyEnd] }
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(key(a), key(b)) })
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(key(ms[i-1]), key(ms[i])) {
			return dst, false // duplicate key
		}
	}
	c.scratch = append(c.scratch[:0], dst[first:]...)
	dst = dst[:first]
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.scratch[m.start-first:m.end-first]...)
	}
	return dst, true
}
