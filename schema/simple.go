package schema

import (
	"cmp"
	"encoding/json"
	"regexp"
	"strings"
)

// This file recognises a simple schema: one made only of the keywords below,
// which the validator of simple_check.go checks on the JSON text itself,
// without the decoded tree and the library's allocations. The library stays
// the authority: the fast path only ever says "valid", and every other
// answer (invalid, or not decidable without the library) goes to the library
// as before, so problems are reported exactly as they were.
//
// The subset:
//
//   - boolean schemas (true, false);
//   - "type", one name or a list;
//   - "enum" and "const" whose values are scalars (null, booleans, numbers,
//     strings);
//   - "minLength", "maxLength" and "pattern" (Go's regexp, which is the
//     library's default engine, so matches are the same);
//   - "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum" as numbers
//     (draft 6 and later);
//   - "properties", "required", "additionalProperties" (a simple schema),
//     "minProperties", "maxProperties";
//   - "items" as one simple schema, "minItems", "maxItems";
//   - the annotations "title", "description", "default", "examples",
//     "$comment", "deprecated", "readOnly", "writeOnly", and "$schema" at the
//     root naming draft 2020-12, 2019-09, 7 or 6, whose semantics for these
//     keywords are the same.
//
// Anything else ($ref, $defs, $id, the combinators, "format", "if",
// "dependent*", "patternProperties", "unevaluated*", "uniqueItems",
// "multipleOf", draft 4, an unknown keyword...) makes the whole schema not
// simple, and it is validated by the library alone.

// typeSet is a set of JSON Schema type names; the zero set allows any type.
type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]typeSet{
	"null":    typeNull,
	"boolean": typeBoolean,
	"number":  typeNumber,
	"integer": typeInteger,
	"string":  typeString,
	"array":   typeArray,
	"object":  typeObject,
}

// simpleNode is one compiled simple schema. A nil *simpleNode is the schema
// true: it allows any value. Unset bounds are -1 or nil.
type simpleNode struct {
	never bool    // the schema false: it allows no value
	types typeSet // 0: any type

	// const and enum, each set only when the keyword is present.
	konst *scalar
	enum  []scalar
	enumd bool // "enum" is present (it may be empty)

	minLength, maxLength int
	pattern              *regexp.Regexp

	minimum, maximum, exclMinimum, exclMaximum *decimal

	// props lists the names of "properties" and of "required", in that
	// order; index finds them when there are many. The bit i of required
	// is set when props[i] is required.
	props                        []simpleProp
	index                        map[string]int
	required                     uint64
	additional                   *simpleNode // nil: any member is allowed
	minProperties, maxProperties int

	items              *simpleNode // nil: any element
	minItems, maxItems int
}

// simpleProp is a member name an object schema knows.
type simpleProp struct {
	name string
	// schema is the "properties" schema of the name; a name only listed in
	// "required" has inProps false, and its value is checked by
	// "additionalProperties".
	schema  *simpleNode
	inProps bool
}

// maxSimpleProps is the most names (in "properties" and "required") an
// object schema may have to be simple: they are tracked in a uint64.
const maxSimpleProps = 64

// indexFrom is the number of names from which a map finds a member's name;
// below, a linear scan is faster.
const indexFrom = 9

// scalar is an enum or const value: a JSON null, boolean, number or string.
type scalar struct {
	kind byte // 'n', 'b', '0' (number) or '"'
	b    bool
	num  decimal
	str  string
}

// neverNode is the schema false.
var neverNode = &simpleNode{never: true}

// compileSimple returns the fast validator of doc, a schema document decoded
// as the library decodes it, or nil when doc is not a simple schema.
func compileSimple(doc any) *simpleSchema {
	if obj, ok := doc.(map[string]any); ok {
		if v, ok := obj["$schema"]; ok && !simpleDraft(v) {
			return nil
		}
	}
	root, ok := simpleNodeOf(doc, true)
	if !ok {
		return nil
	}
	return &simpleSchema{root: root}
}

// simpleDraft reports whether v, the value of "$schema", names a draft
// whose semantics for the simple keywords are those of draft 2020-12. The
// URL is read as the library reads it: http or https, an empty fragment.
func simpleDraft(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	s = strings.TrimSuffix(s, "#")
	if u, ok := strings.CutPrefix(s, "http://"); ok {
		s = u
	} else {
		s = strings.TrimPrefix(s, "https://")
	}
	switch s {
	case "json-schema.org/draft/2020-12/schema",
		"json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema",
		"json-schema.org/draft-06/schema":
		return true
	}
	return false
}

// simpleNodeOf compiles v, a schema; ok is false when it is not simple.
func simpleNodeOf(v any, root bool) (n *simpleNode, ok bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return nil, true
		}
		return neverNode, true
	case map[string]any:
		return simpleObjectNode(v, root)
	}
	return nil, false
}

func simpleObjectNode(obj map[string]any, root bool) (*simpleNode, bool) {
	n := &simpleNode{minLength: -1, maxLength: -1, minProperties: -1, maxProperties: -1, minItems: -1, maxItems: -1}
	var properties map[string]any
	var required []any
	for key, v := range obj {
		ok := true
		switch key {
		case "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly":
		case "$schema":
			ok = root // checked by compileSimple
		case "type":
			n.types, ok = simpleTypes(v)
		case "const":
			var c scalar
			c, ok = scalarOf(v)
			n.konst = &c
		case "enum":
			n.enumd = true
			n.enum, ok = scalarsOf(v)
		case "minLength":
			n.minLength, ok = smallInt(v)
		case "maxLength":
			n.maxLength, ok = smallInt(v)
		case "minItems":
			n.minItems, ok = smallInt(v)
		case "maxItems":
			n.maxItems, ok = smallInt(v)
		case "minProperties":
			n.minProperties, ok = smallInt(v)
		case "maxProperties":
			n.maxProperties, ok = smallInt(v)
		case "pattern":
			n.pattern, ok = simplePattern(v)
		case "minimum":
			n.minimum, ok = schemaNumber(v)
		case "maximum":
			n.maximum, ok = schemaNumber(v)
		case "exclusiveMinimum":
			n.exclMinimum, ok = schemaNumber(v)
		case "exclusiveMaximum":
			n.exclMaximum, ok = schemaNumber(v)
		case "properties":
			properties, ok = v.(map[string]any)
		case "required":
			required, ok = v.([]any)
		case "additionalProperties":
			n.additional, ok = simpleNodeOf(v, false)
		case "items":
			n.items, ok = simpleNodeOf(v, false)
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	for name, v := range properties {
		sub, ok := simpleNodeOf(v, false)
		if !ok {
			return nil, false
		}
		n.props = append(n.props, simpleProp{name: name, schema: sub, inProps: true})
	}
	for _, v := range required {
		name, ok := v.(string)
		if !ok {
			return nil, false
		}
		i := n.find([]byte(name))
		if i < 0 {
			i = len(n.props)
			n.props = append(n.props, simpleProp{name: name})
		}
		n.required |= 1 << i // beyond 64 names, n is refused below
	}
	if len(n.props) > maxSimpleProps {
		return nil, false
	}
	if len(n.props) >= indexFrom {
		n.index = make(map[string]int, len(n.props))
		for i, p := range n.props {
			n.index[p.name] = i
		}
	}
	return n, true
}

// find returns the index in n.props of name, or -1. It does not allocate.
func (n *simpleNode) find(name []byte) int {
	if n.index != nil {
		if i, ok := n.index[string(name)]; ok {
			return i
		}
		return -1
	}
	for i := range n.props {
		if n.props[i].name == string(name) {
			return i
		}
	}
	return -1
}

// simpleTypes reads the value of "type".
func simpleTypes(v any) (typeSet, bool) {
	switch v := v.(type) {
	case string:
		t, ok := typeNames[v]
		return t, ok
	case []any:
		var ts typeSet
		for _, e := range v {
			name, ok := e.(string)
			if !ok {
				return 0, false
			}
			t, ok := typeNames[name]
			if !ok {
				return 0, false
			}
			ts |= t
		}
		// An empty list allows any type, as the library reads it.
		return ts, true
	}
	return 0, false
}

// scalarOf reads an enum or const value; ok is false for objects, arrays
// and numbers that the library cannot compare exactly.
func scalarOf(v any) (scalar, bool) {
	switch v := v.(type) {
	case nil:
		return scalar{kind: 'n'}, true
	case bool:
		return scalar{kind: 'b', b: v}, true
	case string:
		return scalar{kind: '"', str: v}, true
	case json.Number:
		d, ok := parseDecimal([]byte(v))
		return scalar{kind: '0', num: d}, ok
	}
	return scalar{}, false
}

func scalarsOf(v any) ([]scalar, bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]scalar, 0, len(a))
	for _, e := range a {
		s, ok := scalarOf(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// maxSmallInt bounds the lengths and counts a simple schema may give; the
// library reads them through an int64 conversion that is only exact for
// integers of moderate size.
const maxSmallInt = 1e9

// smallInt reads a length or count keyword: an integer in [0, 1e9), in any
// notation the library takes for an integer (2, 2.0, 2e0).
func smallInt(v any) (int, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	d, ok := parseDecimal([]byte(num))
	if !ok || d.neg || !d.isInteger() || d.point > 9 {
		return 0, false
	}
	n := 0
	for i := range d.point {
		n = n*10 + int(d.digit(i)-'0')
	}
	if n >= maxSmallInt {
		return 0, false
	}
	return n, true
}

// schemaNumber reads a bound keyword: a number the library parses exactly.
// A boolean (draft 4's exclusiveMinimum) is not simple.
func schemaNumber(v any) (*decimal, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	d, ok := parseDecimal([]byte(num))
	if !ok {
		return nil, false
	}
	return &d, true
}

// simplePattern compiles "pattern" as the library's default engine does.
func simplePattern(v any) (*regexp.Regexp, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	re, err := regexp.Compile(s)
	return re, err == nil
}

// decimal is an exact decimal number taken from its JSON text, without
// allocating: the value is 0.DDD × 10^point, where the significant digits
// DDD are those of hi followed by those of lo, the integer and fraction
// digits of the text without leading and trailing zeros. Zero has no digits
// and is not negative.
type decimal struct {
	neg    bool
	hi, lo []byte
	point  int
}

// Bounds of the numbers the fast path decides. The library parses numbers
// with big.Rat.SetString, which refuses an effective exponent beyond 1e6
// (then a number is not an integer, and a bound makes validation fail);
// numbers far inside these bounds parse the same in both.
const (
	maxExponentDigits = 4      // |exponent| < 10000
	maxFractionDigits = 100000 // fraction digits as written
)

// parseDecimal reads lit, a JSON number; ok is false when the number is
// beyond the bounds above.
func parseDecimal(lit []byte) (d decimal, ok bool) {
	s := lit
	if len(s) > 0 && s[0] == '-' {
		d.neg = true
		s = s[1:]
	}
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	intPart, s := s[:i], s[i:]
	var frac []byte
	if len(s) > 0 && s[0] == '.' {
		s = s[1:]
		i = 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		frac, s = s[:i], s[i:]
	}
	if len(intPart) == 0 || len(frac) > maxFractionDigits {
		return decimal{}, false
	}
	exp := 0
	if len(s) > 0 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		negExp := false
		if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
			negExp = s[0] == '-'
			s = s[1:]
		}
		if len(s) == 0 {
			return decimal{}, false
		}
		for len(s) > 1 && s[0] == '0' {
			s = s[1:]
		}
		if len(s) > maxExponentDigits {
			return decimal{}, false
		}
		for ; len(s) > 0 && '0' <= s[0] && s[0] <= '9'; s = s[1:] {
			exp = exp*10 + int(s[0]-'0')
		}
		if negExp {
			exp = -exp
		}
	}
	if len(s) != 0 {
		return decimal{}, false
	}
	d.point = len(intPart) + exp
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
		d.point--
	}
	if len(intPart) == 0 {
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
			d.point--
		}
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(frac) == 0 {
		for len(intPart) > 0 && intPart[len(intPart)-1] == '0' {
			intPart = intPart[:len(intPart)-1]
		}
	}
	if len(intPart) == 0 && len(frac) == 0 {
		return decimal{}, true
	}
	d.hi, d.lo = intPart, frac
	return d, true
}

// digits returns the number of significant digits of d.
func (d *decimal) digits() int {
	return len(d.hi) + len(d.lo)
}

// digit returns the significant digit i of d, an ASCII digit, or '0' past
// the last one.
func (d *decimal) digit(i int) byte {
	switch {
	case i < len(d.hi):
		return d.hi[i]
	case i < d.digits():
		return d.lo[i-len(d.hi)]
	}
	return '0'
}

// isInteger reports whether d has no fractional part.
func (d *decimal) isInteger() bool {
	return d.digits() <= d.point
}

// sign returns -1, 0 or +1.
func (d *decimal) sign() int {
	switch {
	case d.digits() == 0:
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// compare compares d and e as numbers: -1, 0 or +1.
func (d *decimal) compare(e *decimal) int {
	ds, es := d.sign(), e.sign()
	if ds != es || ds == 0 {
		return cmp.Compare(ds, es)
	}
	// Same sign, both non-zero: compare magnitudes, then apply the sign.
	m := 0
	switch {
	case d.point != e.point:
		m = cmp.Compare(d.point, e.point)
	default:
		n := max(d.digits(), e.digits())
		for i := 0; i < n && m == 0; i++ {
			m = cmp.Compare(int(d.digit(i)), int(e.digit(i)))
		}
	}
	return m * ds
}
