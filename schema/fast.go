package schema

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The fast path. Most output schemas are plain records: typed properties,
// required names, no extra properties, arrays of records, enums. For those,
// Compile also builds a fastNode tree that checks a document directly on its
// bytes, without decoding it and without allocating. The fast check only ever
// answers "valid" or "don't know": whenever it is not certain (a problem, or
// something it does not model such as an escaped member name or the number
// 1.0 against "integer"), Validate runs the full validator, which alone
// decides what is wrong. A schema using any keyword outside the subset below
// gets no fast path at all.

// Bits of fastNode.types.
const (
	typeNull uint8 = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeInteger
	typeString
)

var typeBits = map[string]uint8{
	"null":    typeNull,
	"boolean": typeBoolean,
	"object":  typeObject,
	"array":   typeArray,
	"number":  typeNumber,
	"integer": typeInteger,
	"string":  typeString,
}

// fastNode is one (sub)schema of the fast subset.
type fastNode struct {
	types uint8 // allowed types; 0 allows any
	never bool  // the false schema

	props    map[string]*fastNode
	required map[string]uint // name -> bit in the seen mask
	addl     addlMode
	addlNode *fastNode

	items *fastNode // nil: any items

	enum []string // raw JSON texts of the allowed values; nil: no enum

	minLen, maxLen     int // -1: unset
	minItems, maxItems int // -1: unset

	hasMin, hasMax, hasExMin, hasExMax bool
	min, max, exMin, exMax             int64
	numUnknown                         bool // a bound is not an int64: numbers go to the full validator
}

type addlMode uint8

const (
	addlAny addlMode = iota
	addlNone
	addlSchema
)

// fastDrafts are the "$schema" values the fast subset is written for.
var fastDrafts = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema":  true,
	"https://json-schema.org/draft/2020-12/schema#": true,
	"https://json-schema.org/draft/2019-09/schema":  true,
	"https://json-schema.org/draft/2019-09/schema#": true,
}

// compileFast builds the fast checker for a schema document that has already
// compiled, or returns nil when the schema is outside the fast subset.
func compileFast(doc any) *fastNode {
	if m, ok := doc.(map[string]any); ok {
		if d, ok := m["$schema"]; ok {
			if s, ok := d.(string); !ok || !fastDrafts[s] {
				return nil
			}
		}
	}
	n, ok := fastFrom(doc, true)
	if !ok {
		return nil
	}
	return n
}

func fastFrom(v any, root bool) (*fastNode, bool) {
	n := &fastNode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	switch v := v.(type) {
	case bool:
		n.never = !v
		return n, true
	case map[string]any:
		for k, kv := range v {
			if !n.keyword(k, kv, root) {
				return nil, false
			}
		}
		return n, true
	default:
		return nil, false
	}
}

// keyword adds one schema keyword to n and reports whether it is in the fast
// subset.
func (n *fastNode) keyword(k string, v any, root bool) bool {
	switch k {
	case "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly",
		"$defs", "definitions":
		// Annotations. Definitions matter only through "$ref", which is not
		// in the subset.
		return true
	case "$schema":
		return root // checked by compileFast
	case "type":
		switch t := v.(type) {
		case string:
			n.types = typeBits[t]
			return n.types != 0
		case []any:
			for _, e := range t {
				s, _ := e.(string)
				b := typeBits[s]
				if b == 0 {
					return false
				}
				n.types |= b
			}
			return n.types != 0
		}
		return false
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		n.props = make(map[string]*fastNode, len(m))
		for name, sub := range m {
			c, ok := fastFrom(sub, false)
			if !ok {
				return false
			}
			n.props[name] = c
		}
		return true
	case "required":
		a, ok := v.([]any)
		if !ok || len(a) > 64 {
			return false
		}
		n.required = make(map[string]uint, len(a))
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return false
			}
			if _, dup := n.required[s]; !dup {
				n.required[s] = uint(len(n.required))
			}
		}
		return true
	case "additionalProperties":
		if b, ok := v.(bool); ok {
			if !b {
				n.addl = addlNone
			}
			return true
		}
		c, ok := fastFrom(v, false)
		n.addl, n.addlNode = addlSchema, c
		return ok
	case "items":
		c, ok := fastFrom(v, false)
		n.items = c
		return ok
	case "enum", "const":
		vals := []any{v}
		if k == "enum" {
			a, ok := v.([]any)
			if !ok {
				return false
			}
			vals = a
		}
		n.enum = make([]string, 0, len(vals))
		for _, e := range vals {
			raw, ok := primitiveText(e)
			if !ok {
				return false
			}
			n.enum = append(n.enum, raw)
		}
		return true
	case "minLength", "maxLength", "minItems", "maxItems":
		num, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, err := strconv.Atoi(string(num))
		if err != nil || i < 0 {
			return false
		}
		switch k {
		case "minLength":
			n.minLen = i
		case "maxLength":
			n.maxLen = i
		case "minItems":
			n.minItems = i
		case "maxItems":
			n.maxItems = i
		}
		return true
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		num, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			n.numUnknown = true
			return true
		}
		switch k {
		case "minimum":
			n.hasMin, n.min = true, i
		case "maximum":
			n.hasMax, n.max = true, i
		case "exclusiveMinimum":
			n.hasExMin, n.exMin = true, i
		case "exclusiveMaximum":
			n.hasExMax, n.exMax = true, i
		}
		return true
	default:
		return false
	}
}

// primitiveText returns the JSON text of a string, number, boolean or null.
func primitiveText(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "null", true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return string(v), true
	case string:
		return quote(v), true
	default:
		return "", false
	}
}

// accepts reports whether the valid JSON document doc certainly matches the
// schema. False means "not known", not "invalid".
func (n *fastNode) accepts(doc []byte) bool {
	w := walker{b: doc}
	return w.check(n)
}

// walker reads one valid JSON document.
type walker struct {
	b []byte
	i int
}

func (w *walker) skipSpace() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// check consumes one value and reports whether it certainly matches n.
func (w *walker) check(n *fastNode) bool {
	w.skipSpace()
	if n.never || w.i >= len(w.b) {
		return false
	}
	start := w.i
	switch w.b[w.i] {
	case '{':
		return n.allows(typeObject) && n.enum == nil && w.object(n)
	case '[':
		return n.allows(typeArray) && n.enum == nil && w.array(n)
	case '"':
		if !n.allows(typeString) {
			return false
		}
		escapes, nonASCII := w.str()
		if n.minLen >= 0 || n.maxLen >= 0 {
			if escapes {
				return false
			}
			body := w.b[start+1 : w.i-1]
			if nonASCII && !utf8.Valid(body) {
				return false
			}
			l := utf8.RuneCount(body)
			if (n.minLen >= 0 && l < n.minLen) || (n.maxLen >= 0 && l > n.maxLen) {
				return false
			}
		}
	case 't':
		w.i += len("true")
		if !n.allows(typeBoolean) {
			return false
		}
	case 'f':
		w.i += len("false")
		if !n.allows(typeBoolean) {
			return false
		}
	case 'n':
		w.i += len("null")
		if !n.allows(typeNull) {
			return false
		}
	default:
		if !w.number(n) {
			return false
		}
	}
	return n.enum == nil || n.inEnum(w.b[start:w.i])
}

func (n *fastNode) allows(t uint8) bool {
	return n.types == 0 || n.types&t != 0
}

func (n *fastNode) inEnum(raw []byte) bool {
	for _, e := range n.enum {
		if string(raw) == e {
			return true
		}
	}
	return false
}

// number consumes a number and reports whether it certainly matches n's type
// and bounds.
func (w *walker) number(n *fastNode) bool {
	start := w.i
	isInt := true
	for w.i < len(w.b) {
		c := w.b[w.i]
		if c == '.' || c == 'e' || c == 'E' {
			isInt = false
		} else if c != '-' && c != '+' && (c < '0' || c > '9') {
			break
		}
		w.i++
	}
	if !n.allows(typeNumber) && !(n.types&typeInteger != 0 && isInt) {
		// Not a number type, or maybe an integer written as 1.0 or 1e2.
		return false
	}
	if !n.hasMin && !n.hasMax && !n.hasExMin && !n.hasExMax && !n.numUnknown {
		return true
	}
	if n.numUnknown || !isInt {
		return false
	}
	x, err := strconv.ParseInt(string(w.b[start:w.i]), 10, 64)
	if err != nil {
		return false
	}
	return (!n.hasMin || x >= n.min) && (!n.hasMax || x <= n.max) &&
		(!n.hasExMin || x > n.exMin) && (!n.hasExMax || x < n.exMax)
}

// str consumes a string and says whether it holds escapes or non-ASCII bytes.
func (w *walker) str() (escapes, nonASCII bool) {
	w.i++ // opening quote
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch {
		case c == '"':
			w.i++
			return escapes, nonASCII
		case c == '\\':
			escapes = true
			w.i++
		case c >= utf8.RuneSelf:
			nonASCII = true
		}
		w.i++
	}
	return escapes, nonASCII
}

func (w *walker) object(n *fastNode) bool {
	w.i++ // '{'
	var seen uint64
	for {
		w.skipSpace()
		if w.i >= len(w.b) {
			return false
		}
		if w.b[w.i] == '}' {
			w.i++
			break
		}
		start := w.i
		escapes, nonASCII := w.str()
		key := w.b[start+1 : w.i-1]
		if escapes || (nonASCII && !utf8.Valid(key)) {
			return false // member names are looked up as written
		}
		w.skipSpace()
		w.i++ // ':'
		if c, ok := n.props[string(key)]; ok {
			if !w.check(c) {
				return false
			}
		} else {
			switch n.addl {
			case addlNone:
				return false
			case addlSchema:
				if !w.check(n.addlNode) {
					return false
				}
			default:
				w.skip()
			}
		}
		if bit, ok := n.required[string(key)]; ok {
			seen |= 1 << bit
		}
		w.skipSpace()
		if w.i < len(w.b) && w.b[w.i] == ',' {
			w.i++
		}
	}
	return seen == 1<<len(n.required)-1
}

func (w *walker) array(n *fastNode) bool {
	w.i++ // '['
	count := 0
	for {
		w.skipSpace()
		if w.i >= len(w.b) {
			return false
		}
		if w.b[w.i] == ']' {
			w.i++
			break
		}
		if n.items != nil {
			if !w.check(n.items) {
				return false
			}
		} else {
			w.skip()
		}
		count++
		w.skipSpace()
		if w.i < len(w.b) && w.b[w.i] == ',' {
			w.i++
		}
	}
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

// skip consumes one value of any kind.
func (w *walker) skip() {
	w.skipSpace()
	depth := 0
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch c {
		case '"':
			w.str()
		case '{', '[':
			depth++
			w.i++
		case '}', ']':
			if depth == 0 {
				return // the end of the enclosing value
			}
			depth--
			w.i++
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return // the end of a number or literal
			}
			w.i++
		default:
			w.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return
		}
	}
}
