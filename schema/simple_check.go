package schema

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// simpleSchema validates JSON text against a simple schema (see simple.go)
// in one pass of a [jsontext.Decoder], writing the compact text as it goes.
// It is immutable and safe for concurrent use.
type simpleSchema struct {
	root *simpleNode
}

// verdict is the answer of the fast path.
type verdict int8

const (
	// undecided: the text holds what the fast path leaves to the library
	// (duplicate names, text that is not UTF-8, a number beyond the exact
	// bounds, or text that is not JSON).
	undecided verdict = iota
	valid
	invalid
)

// walker is the state of one check: the decoder reads the text in place
// (a bytes.Buffer is read without a copy), strict about UTF-8 and
// duplicate names, which the library's decoding would resolve.
type walker struct {
	in      bytes.Buffer
	dec     *jsontext.Decoder
	out     []byte
	emit    bool   // whether to write out
	scratch []byte // an unquoted string or name
}

var walkers = sync.Pool{New: func() any {
	w := new(walker)
	w.dec = jsontext.NewDecoder(&w.in)
	return w
}}

// maxScratch is the largest unquoting buffer a pooled walker keeps.
const maxScratch = 4 << 10

// check validates b, one JSON value with optional white space around it.
// When emit is set and the verdict is valid, out is b as compact JSON (as
// [encoding/json.Compact] writes it) in a new slice. A nil s decides nothing.
func (s *simpleSchema) check(b []byte, emit bool) (out []byte, v verdict) {
	if s == nil {
		return nil, undecided
	}
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	// The Buffer value is replaced, not written to, so that the decoder
	// reads b itself; it is dropped again before the walker is pooled.
	w.in = *bytes.NewBuffer(b)
	w.dec.Reset(&w.in)
	w.emit = emit
	if emit {
		w.out = make([]byte, 0, len(b))
	}
	defer func() {
		w.in = bytes.Buffer{}
		w.dec.Reset(&w.in)
		w.out = nil
		if cap(w.scratch) > maxScratch {
			w.scratch = nil
		}
	}()
	v = w.value(s.root)
	if v != valid {
		return nil, v
	}
	if _, err := w.dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, undecided
	}
	return w.out, valid
}

// value checks the next value of the text against n.
func (w *walker) value(n *simpleNode) verdict {
	k := w.dec.PeekKind()
	if n != nil {
		if n.never {
			return invalid
		}
		if n.types != 0 && !n.types.allows(k) {
			return invalid
		}
		if (k == '{' || k == '[') && (n.konst != nil || n.enumd) {
			return invalid // const and enum hold scalars only
		}
	}
	switch k {
	case '{':
		return w.object(n)
	case '[':
		return w.array(n)
	case 0:
		return undecided // a syntax error, a duplicate name, invalid UTF-8...
	}
	raw, err := w.dec.ReadValue()
	if err != nil {
		return undecided
	}
	if w.emit {
		w.out = append(w.out, raw...)
	}
	if n == nil {
		return valid
	}
	switch k {
	case '"':
		return w.str(n, raw)
	case '0':
		return n.number(raw)
	case 't', 'f':
		return n.matchScalar(scalar{kind: 'b', b: k == 't'})
	}
	return n.matchScalar(scalar{kind: 'n'})
}

// allows reports whether a value of kind k can have one of the types of ts;
// a number is checked further for "integer" by [simpleNode.number].
func (ts typeSet) allows(k jsontext.Kind) bool {
	switch k {
	case 'n':
		return ts&typeNull != 0
	case 't', 'f':
		return ts&typeBoolean != 0
	case '0':
		return ts&(typeNumber|typeInteger) != 0
	case '"':
		return ts&typeString != 0
	case '[':
		return ts&typeArray != 0
	case '{':
		return ts&typeObject != 0
	}
	return true // an error, reported by the read that follows
}

func (w *walker) object(n *simpleNode) verdict {
	if _, err := w.dec.ReadToken(); err != nil {
		return undecided
	}
	if w.emit {
		w.out = append(w.out, '{')
	}
	var seen uint64
	count := 0
	for w.dec.PeekKind() != '}' {
		name, err := w.dec.ReadValue()
		if err != nil {
			return undecided
		}
		if w.emit {
			if count > 0 {
				w.out = append(w.out, ',')
			}
			w.out = append(w.out, name...)
			w.out = append(w.out, ':')
		}
		count++
		var sub *simpleNode
		if n != nil {
			key, ok := w.unquote(name)
			if !ok {
				return undecided
			}
			sub = n.additional
			if i := n.find(key); i >= 0 {
				seen |= 1 << i
				if p := &n.props[i]; p.inProps {
					sub = p.schema
				}
			}
		}
		if v := w.value(sub); v != valid {
			return v
		}
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return undecided
	}
	if w.emit {
		w.out = append(w.out, '}')
	}
	if n == nil {
		return valid
	}
	if seen&n.required != n.required ||
		n.minProperties >= 0 && count < n.minProperties ||
		n.maxProperties >= 0 && count > n.maxProperties {
		return invalid
	}
	return valid
}

func (w *walker) array(n *simpleNode) verdict {
	if _, err := w.dec.ReadToken(); err != nil {
		return undecided
	}
	if w.emit {
		w.out = append(w.out, '[')
	}
	var items *simpleNode
	if n != nil {
		items = n.items
	}
	count := 0
	for w.dec.PeekKind() != ']' {
		if w.emit && count > 0 {
			w.out = append(w.out, ',')
		}
		count++
		if v := w.value(items); v != valid {
			return v
		}
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return undecided
	}
	if w.emit {
		w.out = append(w.out, ']')
	}
	if n != nil && (n.minItems >= 0 && count < n.minItems || n.maxItems >= 0 && count > n.maxItems) {
		return invalid
	}
	return valid
}

// unquote returns the text of raw, a JSON string the decoder has checked,
// without allocating: raw's own bytes when it has no escapes, else w's
// scratch buffer, valid until the next unquote.
func (w *walker) unquote(raw jsontext.Value) ([]byte, bool) {
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return s, true
	}
	var err error
	w.scratch, err = jsontext.AppendUnquote(w.scratch[:0], raw)
	return w.scratch, err == nil
}

// str checks raw, a JSON string, against n.
func (w *walker) str(n *simpleNode, raw jsontext.Value) verdict {
	if n.minLength < 0 && n.maxLength < 0 && n.pattern == nil && n.konst == nil && !n.enumd {
		return valid
	}
	s, ok := w.unquote(raw)
	if !ok {
		return undecided
	}
	if n.minLength >= 0 || n.maxLength >= 0 {
		// The library counts runes of the decoded string; s is valid UTF-8.
		l := utf8.RuneCount(s)
		if n.minLength >= 0 && l < n.minLength || n.maxLength >= 0 && l > n.maxLength {
			return invalid
		}
	}
	if n.pattern != nil && !n.pattern.Match(s) {
		return invalid
	}
	if n.konst != nil && (n.konst.kind != '"' || n.konst.str != string(s)) {
		return invalid
	}
	if !n.enumd {
		return valid
	}
	for i := range n.enum {
		if e := &n.enum[i]; e.kind == '"' && e.str == string(s) {
			return valid
		}
	}
	return invalid
}

// number checks raw, a JSON number, against n.
func (n *simpleNode) number(raw jsontext.Value) verdict {
	wantInt := n.types != 0 && n.types&typeNumber == 0
	if !wantInt && n.minimum == nil && n.maximum == nil && n.exclMinimum == nil && n.exclMaximum == nil && !n.hasNumbers() {
		if n.konst != nil || n.enumd {
			return invalid // no number to match
		}
		return valid
	}
	d, ok := parseDecimal(raw)
	if !ok {
		return undecided
	}
	if wantInt && !d.isInteger() ||
		n.minimum != nil && d.compare(n.minimum) < 0 ||
		n.maximum != nil && d.compare(n.maximum) > 0 ||
		n.exclMinimum != nil && d.compare(n.exclMinimum) <= 0 ||
		n.exclMaximum != nil && d.compare(n.exclMaximum) >= 0 {
		return invalid
	}
	return n.matchScalar(scalar{kind: '0', num: d})
}

// hasNumbers reports whether n's const or enum holds a number.
func (n *simpleNode) hasNumbers() bool {
	if n.konst != nil && n.konst.kind == '0' {
		return true
	}
	for i := range n.enum {
		if n.enum[i].kind == '0' {
			return true
		}
	}
	return false
}

// matchScalar checks v, not a string, against n's const and enum.
func (n *simpleNode) matchScalar(v scalar) verdict {
	if n.konst != nil && !n.konst.equal(&v) {
		return invalid
	}
	if !n.enumd {
		return valid
	}
	for i := range n.enum {
		if n.enum[i].equal(&v) {
			return valid
		}
	}
	return invalid
}

// equal reports whether a and b are the same value, as the library compares
// them: numbers by value, so that 1, 1.0 and 1e0 are equal.
func (a *scalar) equal(b *scalar) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case 'b':
		return a.b == b.b
	case '0':
		return a.num.compare(&b.num) == 0
	case '"':
		return a.str == b.str
	}
	return true // null
}
