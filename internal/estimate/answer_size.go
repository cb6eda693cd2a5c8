package estimate

import (
	"encoding/json"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// The sizes a dry run assumes where the output schema says nothing: see
// schemaAnswers for how they are used.
const (
	// shortString and longString are the characters of a string without
	// maxLength in the short and the long answer.
	shortString = 10
	longString  = 200
	// maxString caps a long string's maxLength.
	maxString = 4000
	// longArray is the items of an array without maxItems in the long
	// answer; maxArray caps a long array's maxItems.
	longArray = 5
	maxArray  = 50
	// maxDepth bounds the nesting followed ($ref cycles).
	maxDepth = 12
	// maxAnswer bounds an answer's size, roughly in bytes: past it arrays
	// and strings stop growing and optional properties are left out (a
	// schema of arrays of arrays would otherwise multiply their sizes).
	maxAnswer = 64 << 10
	// freeTextLow and freeTextHigh are the tokens of an answer without an
	// output schema.
	freeTextLow  = 10
	freeTextHigh = 300
)

// schemaAnswers returns two JSON answers the output schema raw accepts (or
// nearly: no pattern is followed): a short one and a long one, from which a
// dry run estimates the completion tokens of an agent's final answer.
//
//   - An object holds its required properties in the short answer, all of
//     its properties in the long one (required ones only from half of
//     maxDepth down).
//   - An array holds minItems items in the short answer; maxItems in the
//     long one, else longArray, at least minItems; maxArray at most.
//   - A string is its enum's or const's shortest and longest member; a
//     format's example (date-time, date, time, email, uri, uuid); else
//     words of max(minLength, shortString) characters (at most maxLength)
//     and of maxLength characters (longString without it, at least
//     minLength); maxString at most.
//   - A number or integer is its minimum (else 0) and its maximum (else
//     123456); a number's long answer a whole maximum takes decimals (the
//     float just below it), its typical one two decimals (0.37 of its
//     range); a boolean true and false; null null.
//   - anyOf and oneOf take their shortest and their longest branch, a
//     type list its shortest and longest type; allOf merges its objects.
//   - "$ref" follows a reference inside the document; a schema that names
//     no type (true, {}) is null in the short answer and a long string in
//     the long one.
//
// raw must be valid JSON (the job file's schema compiled).
func schemaAnswers(raw json.RawMessage) (short, long string, err error) {
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return "", "", err
	}
	g := answerGen{root: root, size: new(int)}
	s, err := json.Marshal(g.value(root, false, 0))
	if err != nil {
		return "", "", err
	}
	*g.size = 0
	l, err := json.Marshal(g.value(root, true, 0))
	if err != nil {
		return "", "", err
	}
	return string(s), string(l), nil
}

// schemaTypical returns a typical JSON answer of the output schema raw,
// the dry run's point estimate: the long answer's shape (every property,
// the longest branch) with strings of typicalString characters (within
// minLength and maxLength) and arrays of typicalItems items.
func schemaTypical(raw json.RawMessage, typicalString int) (string, error) {
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return "", err
	}
	g := answerGen{root: root, size: new(int), typical: typicalString}
	b, err := json.Marshal(g.value(root, true, 0))
	return string(b), err
}

// typicalItems is the items of a typical answer's array: the middle
// between minItems (at least 1) and maxItems (3 without it), at least
// minItems and at most maxArray.
func typicalItems(m map[string]any) int {
	lo := min(intKey(m, "minItems", 0), maxArray)
	hi := min(intKey(m, "maxItems", max(lo, 3)), maxArray)
	return max(lo, (max(lo, min(1, hi))+hi+1)/2)
}

// answerGen builds the answers of one schema document.
type answerGen struct {
	root any  // the document, for "$ref"
	size *int // the answer's size so far, roughly in bytes
	// typical, when above 0, makes the long answer a typical one: strings
	// of typical characters, arrays of typicalItems.
	typical int
}

// untyped returns the long (or typical) answer of a schema that names no
// type: a string.
func (g answerGen) untyped() string {
	if g.typical > 0 {
		return words(g.typical)
	}
	return words(longString)
}

// full reports whether the answer reached maxAnswer.
func (g answerGen) full() bool { return *g.size >= maxAnswer }

// value returns the short (long false) or long answer of schema s.
func (g answerGen) value(s any, long bool, depth int) any {
	*g.size += 2 // a value's delimiters, at least
	m, ok := s.(map[string]any)
	if !ok || depth > maxDepth {
		if b, isBool := s.(bool); isBool && b && long {
			return g.untyped()
		}
		return nil
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := g.resolve(ref); ok {
			return g.value(target, long, depth+1)
		}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return pick(e, long)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if bs, ok := m[key].([]any); ok && len(bs) > 0 {
			vs := make([]any, len(bs))
			for i, b := range bs {
				vs[i] = g.value(b, long, depth+1)
			}
			return pick(vs, long)
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		merged := map[string]any{}
		for _, b := range append(all, withoutAllOf(m)) {
			if obj, ok := g.value(b, long, depth+1).(map[string]any); ok {
				for k, v := range obj {
					merged[k] = v
				}
			}
		}
		if len(merged) > 0 {
			return merged
		}
		if !hasType(m) {
			return g.value(all[len(all)-1], long, depth+1)
		}
	}
	switch t := m["type"].(type) {
	case string:
		return g.typed(m, t, long, depth)
	case []any:
		vs := make([]any, 0, len(t))
		for _, name := range t {
			if n, ok := name.(string); ok {
				vs = append(vs, g.typed(m, n, long, depth))
			}
		}
		if len(vs) > 0 {
			return pick(vs, long)
		}
	}
	switch {
	case m["properties"] != nil:
		return g.typed(m, "object", long, depth)
	case m["items"] != nil || m["prefixItems"] != nil:
		return g.typed(m, "array", long, depth)
	case long:
		return g.untyped()
	}
	return nil
}

// withoutAllOf returns schema m without its allOf: its own keywords.
func withoutAllOf(m map[string]any) map[string]any {
	own := make(map[string]any, len(m))
	for k, v := range m {
		if k != "allOf" {
			own[k] = v
		}
	}
	return own
}

// hasType reports whether schema m names a type.
func hasType(m map[string]any) bool {
	_, ok := m["type"]
	return ok
}

// typed returns the answer of schema m as type t.
func (g answerGen) typed(m map[string]any, t string, long bool, depth int) any {
	switch t {
	case "object":
		props, _ := m["properties"].(map[string]any)
		obj := map[string]any{}
		required := map[string]bool{}
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		// Deep down (a recursive schema) the long answer stops at what
		// is required, so that it ends.
		all := long && depth <= maxDepth/2 && !g.full()
		for name, ps := range props {
			if all || required[name] {
				obj[name] = g.value(ps, long, depth+1)
			}
		}
		for name := range required { // required without a schema
			if _, ok := obj[name]; !ok {
				obj[name] = g.value(true, long, depth+1)
			}
		}
		return obj
	case "array":
		lo := min(intKey(m, "minItems", 0), maxArray)
		n := lo
		if long {
			n = max(min(intKey(m, "maxItems", longArray), maxArray), lo)
			if g.typical > 0 {
				n = typicalItems(m)
			}
		}
		prefix, _ := m["prefixItems"].([]any)
		items := make([]any, 0, n)
		for i := range n {
			if g.full() {
				break
			}
			s := m["items"]
			if i < len(prefix) {
				s = prefix[i]
			}
			if s == nil {
				s = true
			}
			items = append(items, g.value(s, long, depth+1))
		}
		return items
	case "string":
		if f, ok := m["format"].(string); ok {
			if ex, ok := formatExamples[f]; ok {
				return ex
			}
		}
		lo := min(intKey(m, "minLength", 0), maxString)
		hi := intKey(m, "maxLength", -1)
		n := max(lo, shortString)
		switch {
		case long && g.typical > 0:
			n = max(lo, g.typical)
		case long:
			n = max(lo, longString)
			if hi >= 0 {
				n = max(lo, hi)
			}
			n = min(n, maxString)
		}
		if hi >= 0 {
			n = min(n, hi)
		}
		if g.full() {
			n = min(n, lo)
		}
		*g.size += n
		return words(n)
	case "integer", "number":
		if long {
			hi := numKey(m, "maximum", 123456)
			if t == "number" && g.typical > 0 && hi < 123456 {
				// A typical number has two decimals, as 0.37 of [0, 1].
				lo := numKey(m, "minimum", 0)
				return math.Round((lo+(hi-lo)*0.37)*100) / 100
			}
			if t == "number" && hi == math.Trunc(hi) && hi < 123456 {
				// A number's longest answer has decimals: 0.75 for a
				// confidence in [0, 1] is longer than its maximum, 1.
				lo := numKey(m, "minimum", 0)
				return math.Nextafter(hi, lo)
			}
			return hi
		}
		return numKey(m, "minimum", 0)
	case "boolean":
		return !long // "true" is the shorter
	}
	return nil // "null", or a type no answer holds
}

// resolve returns the schema a "$ref" inside the document names.
func (g answerGen) resolve(ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	cur := g.root
	ptr := strings.TrimPrefix(ref, "#")
	if ptr == "" {
		return cur, true
	}
	for seg := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		if s, err := url.PathUnescape(seg); err == nil {
			seg = s
		}
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// formatExamples are the strings of the formats whose values have one
// shape.
var formatExamples = map[string]string{
	"date-time": "2026-01-01T12:00:00Z",
	"date":      "2026-01-01",
	"time":      "12:00:00",
	"email":     "someone@example.com",
	"uri":       "https://example.com/some/path",
	"url":       "https://example.com/some/path",
	"uuid":      "123e4567-e89b-12d3-a456-426614174000",
}

// pick returns the value of vs whose JSON is the shortest (long false) or
// the longest.
func pick(vs []any, long bool) any {
	best, size := vs[0], -1
	for _, v := range vs {
		b, _ := json.Marshal(v)
		if size < 0 || long && len(b) > size || !long && len(b) < size {
			best, size = v, len(b)
		}
	}
	return best
}

// intKey returns the non-negative integer m[key], or def.
func intKey(m map[string]any, key string, def int) int {
	f, ok := m[key].(float64)
	if !ok || f < 0 || f > math.MaxInt32 {
		return def
	}
	return int(f)
}

// numKey returns the number m[key], or def.
func numKey(m map[string]any, key string, def float64) float64 {
	if f, ok := m[key].(float64); ok {
		return f
	}
	return def
}

// filler is the prose a dry run's answers are made of: ordinary English
// words, which tokenizers split as they split a model's text.
const filler = "the review found that this part of the code handles the input as expected but one case is not covered and should be checked again "

// words returns n characters of filler text.
func words(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.TrimRight(strings.Repeat(filler, n/len(filler)+1)[:n], " ")
}
