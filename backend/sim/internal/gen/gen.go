// Package gen is the simulator's schema-driven value generator: it
// compiles a JSON Schema once into a [Generator] that writes valid (or
// deliberately invalid) JSON values from a seeded [RNG]. It is internal to
// backend/sim: the in-process model writes tool arguments and answers with
// it, and simhttp writes its JSON strings with [AppendJSONString].
package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RNG is the simulator's deterministic random source. It is a value type
// with concrete methods, so a call's state stays on the stack.
type RNG struct{ src rand.PCG }

// NewRNG returns a source seeded with seed1 and seed2.
func NewRNG(seed1, seed2 uint64) RNG {
	var r RNG
	r.src.Seed(seed1, seed2)
	return r
}

// intN returns a number in [0, n); n must be positive.
func (r *RNG) intN(n int) int {
	return int(r.uint64N(uint64(n)))
}

// uint64N returns a number in [0, n); n must be positive.
func (r *RNG) uint64N(n uint64) uint64 {
	hi, _ := bits.Mul64(r.src.Uint64(), n)
	return hi
}

// Float64 returns a number in [0, 1).
func (r *RNG) Float64() float64 {
	return float64(r.src.Uint64()>>11) / (1 << 53)
}

type kind uint8

const (
	kindAny kind = iota // no type: a short string
	kindObject
	kindArray
	kindString
	kindInteger
	kindNumber
	kindBoolean
	kindNull
)

var kinds = map[string]kind{
	"object": kindObject, "array": kindArray, "string": kindString, "integer": kindInteger,
	"number": kindNumber, "boolean": kindBoolean, "null": kindNull,
}

// Generator writes JSON values that satisfy one JSON Schema node. It is
// compiled once per schema and is immutable afterwards, so one generator
// serves concurrent calls.
type Generator struct {
	// alias is set on a reference: the generator of its target, which may
	// still be compiling when the reference is met.
	alias *Generator

	kind  kind
	fixed [][]byte // JSON texts of the const or enum values: pick one
	hint  []byte   // JSON text of the default or first example: used as is

	props []prop // object properties, sorted by name

	items    *Generator   // nil: any items
	prefix   []*Generator // prefixItems (or draft 7 array-form items)
	noExtra  bool         // items: false, no items after the prefix
	unique   bool         // uniqueItems
	minItems int          // declared minItems, 0 when absent
	minPref  int          // preferred minimum: minItems, at least 1 when maxItems allows
	maxItems int

	minLen, maxLen int // maxLen < 0: no limit
	format         string

	min, max         float64 // NaN: no bound
	exclMin, exclMax bool    // min or max is exclusive
	multipleOf       float64 // 0: none
	multDecimals     int     // decimals of multipleOf, to print multiples exactly
}

type prop struct {
	name     string
	norm     string   // the name's words run together: see Given
	desc     []string // the words of its description
	quoted   []byte   // the name as a JSON string followed by ':'
	required bool
	gen      *Generator
}

// Depth limits. compile follows at most maxDepth nested combinators and
// non-trivial references; generation fills optional parts only above
// fillDepth and gives up (writing null) beyond maxGenDepth, which only an
// unsatisfiable recursive schema reaches.
const (
	maxDepth    = 64
	fillDepth   = 4
	maxGenDepth = 64
)

// maxBytes bounds the size of a value: past it, objects and arrays get no
// more members. Only a schema demanding a huge or infinite value (nested
// minItems, required self-references) reaches it, and gets an invalid
// value rather than exhausting memory.
const maxBytes = 1 << 20

// Compile builds a generator from a schema document. Local references
// ("#/$defs/x", "#/definitions/x", "#") are followed, recursive ones
// included; allOf is merged, anyOf and oneOf take their first non-null
// alternative. Keywords a value cannot easily be generated for (pattern,
// not, if/then/else) are ignored.
func Compile(raw json.RawMessage) (*Generator, error) {
	if len(raw) == 0 {
		return &Generator{kind: kindObject}, nil
	}
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := &compiler{root: root, refs: map[string]*Generator{}}
	return c.node(root, 0)
}

// compiler holds the state of one compile: the document and the generators
// of the references seen so far, which lets recursive schemas compile to a
// cyclic generator.
type compiler struct {
	root any
	refs map[string]*Generator
}

// annotations are keywords that do not constrain a value: a node with only
// these besides $ref is the referenced schema itself.
var annotations = map[string]bool{
	"$ref": true, "$comment": true, "title": true, "description": true,
	"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$schema": true, "$defs": true, "definitions": true,
}

func (c *compiler) node(node any, depth int) (*Generator, error) {
	if depth > maxDepth {
		return nil, errors.New("schema nests too deeply (recursive $ref?)")
	}
	switch n := node.(type) {
	case bool:
		return &Generator{kind: kindAny}, nil
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok && onlyAnnotations(n) {
			if g, ok := c.refs[ref]; ok {
				return g, nil // compiled, or being compiled further up
			}
			target, err := resolveRef(ref, c.root)
			if err != nil {
				return nil, err
			}
			g := &Generator{}
			c.refs[ref] = g
			tg, err := c.node(target, depth+1)
			if err != nil {
				return nil, err
			}
			// Aliases never form a loop: a cycle of bare references has no
			// constraint, and g is left to generate any value.
			if tg.resolve() != g {
				g.alias = tg
			}
			return g, nil
		}
		if alt, ok := soleAlternative(n); ok {
			// Compiled on its own, so that a reference in it goes through
			// c.refs and a recursive schema ends in a cycle.
			return c.node(alt, depth+1)
		}
		flat, err := c.flatten(n, depth)
		if err != nil {
			return nil, err
		}
		return c.object(flat, depth)
	default:
		return nil, fmt.Errorf("schema node is %T, want an object", node)
	}
}

// soleAlternative returns the subschema n amounts to when its only
// constraint is an anyOf or oneOf (the alternative chosen) or an allOf of
// one part.
func soleAlternative(n map[string]any) (any, bool) {
	var alt any
	found := false
	for k, v := range n {
		if annotations[k] && k != "$ref" {
			continue
		}
		list, ok := v.([]any)
		if found || !ok || len(list) == 0 {
			return nil, false
		}
		switch {
		case k == "anyOf" || k == "oneOf":
			alt = pickAlternative(list)
		case k == "allOf" && len(list) == 1:
			alt = list[0]
		default:
			return nil, false
		}
		found = true
	}
	return alt, found
}

func onlyAnnotations(n map[string]any) bool {
	for k := range n {
		if !annotations[k] {
			return false
		}
	}
	return true
}

// flatten returns a node equivalent to n for generation, without $ref,
// allOf, anyOf or oneOf at its top: references and allOf parts are merged
// in, and so is the chosen alternative of anyOf and oneOf.
func (c *compiler) flatten(n map[string]any, depth int) (map[string]any, error) {
	if depth > maxDepth {
		return nil, errors.New("schema nests too deeply (recursive $ref?)")
	}
	sub := func(s any) (map[string]any, error) {
		m, ok := s.(map[string]any)
		if !ok {
			return map[string]any{}, nil // true or false: nothing to merge
		}
		return c.flatten(m, depth+1)
	}
	if ref, ok := n["$ref"].(string); ok {
		target, err := resolveRef(ref, c.root)
		if err != nil {
			return nil, err
		}
		t, err := sub(target)
		if err != nil {
			return nil, err
		}
		n = merge(t, without(n, "$ref"))
	}
	if parts, ok := n["allOf"].([]any); ok {
		n = without(n, "allOf")
		for _, p := range parts {
			t, err := sub(p)
			if err != nil {
				return nil, err
			}
			n = merge(n, t)
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts, ok := n[key].([]any)
		if !ok {
			continue
		}
		n = without(n, key)
		if len(alts) == 0 {
			continue
		}
		t, err := sub(pickAlternative(alts))
		if err != nil {
			return nil, err
		}
		n = merge(n, t)
	}
	return n, nil
}

// pickAlternative returns the first alternative that does not only allow
// null, so that optional values are generated rather than left out.
func pickAlternative(alts []any) any {
	for _, a := range alts {
		if m, ok := a.(map[string]any); ok && m["type"] == "null" {
			continue
		}
		return a
	}
	return alts[0]
}

func without(n map[string]any, key string) map[string]any {
	m := make(map[string]any, len(n))
	for k, v := range n {
		if k != key {
			m[k] = v
		}
	}
	return m
}

// merge returns the conjunction of two schema nodes, as far as generation
// needs it: properties are united (a property in both is the allOf of its
// two schemas), required names concatenated, bounds tightened, types
// intersected, and any other keyword of extra overrides base's.
func merge(base, extra map[string]any) map[string]any {
	m := make(map[string]any, len(base)+len(extra))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range extra {
		old, ok := m[k]
		if !ok {
			m[k] = v
			continue
		}
		switch k {
		case "properties":
			bp, ok1 := old.(map[string]any)
			ep, ok2 := v.(map[string]any)
			if !ok1 || !ok2 {
				m[k] = v
				continue
			}
			props := make(map[string]any, len(bp)+len(ep))
			for name, s := range bp {
				props[name] = s
			}
			for name, s := range ep {
				if b, ok := props[name]; ok {
					props[name] = map[string]any{"allOf": []any{b, s}}
				} else {
					props[name] = s
				}
			}
			m[k] = props
		case "required":
			a, _ := old.([]any)
			b, _ := v.([]any)
			m[k] = append(slices.Clip(a), b...)
		case "type":
			m[k] = intersectTypes(old, v)
		case "minimum", "exclusiveMinimum", "minLength", "minItems":
			m[k] = pickNum(old, v, math.Max)
		case "maximum", "exclusiveMaximum", "maxLength", "maxItems":
			m[k] = pickNum(old, v, math.Min)
		default:
			m[k] = v
		}
	}
	return m
}

func pickNum(a, b any, f func(x, y float64) float64) any {
	x, ok1 := a.(float64)
	y, ok2 := b.(float64)
	if !ok1 || !ok2 {
		return b
	}
	return f(x, y)
}

// intersectTypes intersects two "type" values; when they share nothing the
// second wins.
func intersectTypes(a, b any) any {
	list := func(t any) []string {
		switch t := t.(type) {
		case string:
			return []string{t}
		case []any:
			var s []string
			for _, x := range t {
				if x, ok := x.(string); ok {
					s = append(s, x)
				}
			}
			return s
		}
		return nil
	}
	as := list(a)
	var both []any
	for _, t := range list(b) {
		switch {
		case slices.Contains(as, t):
			both = append(both, t)
		case t == "integer" && slices.Contains(as, "number"):
			both = append(both, t)
		case t == "number" && slices.Contains(as, "integer"):
			both = append(both, "integer")
		}
	}
	if len(both) == 0 {
		return b
	}
	return both
}

// object compiles a flattened schema node.
func (c *compiler) object(n map[string]any, depth int) (*Generator, error) {
	g := &Generator{min: math.NaN(), max: math.NaN(), maxLen: -1}
	if v, ok := n["const"]; ok {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		g.fixed = [][]byte{b}
	} else if e, ok := n["enum"].([]any); ok && len(e) > 0 {
		for _, v := range e {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			g.fixed = append(g.fixed, b)
		}
	}
	var hint any
	if d, ok := n["default"]; ok {
		hint = d
	} else if ex, ok := n["examples"].([]any); ok && len(ex) > 0 {
		hint = ex[0]
	}
	if hint != nil {
		b, err := json.Marshal(hint)
		if err != nil {
			return nil, err
		}
		g.hint = b
	}

	switch t := n["type"].(type) {
	case string:
		g.kind = kinds[t]
	case []any:
		// The first non-null type, or null when that is all there is.
		g.kind = kindAny
		for _, x := range t {
			if s, ok := x.(string); ok {
				if k := kinds[s]; k != kindNull {
					g.kind = k
					break
				}
				g.kind = kindNull
			}
		}
	default:
		switch {
		case n["properties"] != nil || n["required"] != nil:
			g.kind = kindObject
		case n["items"] != nil || n["prefixItems"] != nil:
			g.kind = kindArray
		default:
			g.kind = kindAny
		}
	}

	g.format, _ = n["format"].(string)
	g.min = num(n, "minimum", math.NaN())
	g.max = num(n, "maximum", math.NaN())
	switch v := n["exclusiveMinimum"].(type) {
	case float64: // draft 6 and later: the bound itself
		if math.IsNaN(g.min) || v >= g.min {
			g.min, g.exclMin = v, true
		}
	case bool: // draft 4: minimum is exclusive
		g.exclMin = v && !math.IsNaN(g.min)
	}
	switch v := n["exclusiveMaximum"].(type) {
	case float64:
		if math.IsNaN(g.max) || v <= g.max {
			g.max, g.exclMax = v, true
		}
	case bool:
		g.exclMax = v && !math.IsNaN(g.max)
	}
	if m := num(n, "multipleOf", 0); m > 0 && !math.IsInf(m, 0) {
		g.multipleOf = m
		s := strconv.FormatFloat(m, 'f', -1, 64)
		if i := strings.IndexByte(s, '.'); i >= 0 {
			g.multDecimals = len(s) - i - 1
		}
	}
	g.minLen = count(n, "minLength", 0)
	g.maxLen = count(n, "maxLength", -1)

	g.minItems = count(n, "minItems", 0)
	g.maxItems = count(n, "maxItems", max(g.minItems, 3))
	g.minPref = max(g.minItems, min(1, g.maxItems))
	g.unique, _ = n["uniqueItems"].(bool)

	required := map[string]bool{}
	if req, ok := n["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	props, _ := n["properties"].(map[string]any)
	for name, s := range props {
		pg, err := c.node(s, depth+1)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		desc := ""
		if sm, ok := s.(map[string]any); ok {
			desc, _ = sm["description"].(string)
		}
		g.props = append(g.props, newProp(name, required[name], pg, desc))
	}
	for name := range required {
		if _, ok := props[name]; !ok {
			// Required but not described: any value will do.
			g.props = append(g.props, newProp(name, true, &Generator{kind: kindAny}, ""))
		}
	}
	// Sorted, as encoding/json orders map keys, so output is stable.
	slices.SortFunc(g.props, func(a, b prop) int { return strings.Compare(a.name, b.name) })

	if pi, ok := n["prefixItems"].([]any); ok {
		for i, s := range pi {
			ig, err := c.node(s, depth+1)
			if err != nil {
				return nil, fmt.Errorf("prefixItems %d: %w", i, err)
			}
			g.prefix = append(g.prefix, ig)
		}
	}
	switch items := n["items"].(type) {
	case nil:
	case bool:
		g.noExtra = !items
	case []any: // draft 7 tuple form
		if g.prefix == nil {
			for i, s := range items {
				ig, err := c.node(s, depth+1)
				if err != nil {
					return nil, fmt.Errorf("items %d: %w", i, err)
				}
				g.prefix = append(g.prefix, ig)
			}
		}
	default:
		ig, err := c.node(items, depth+1)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		g.items = ig
	}
	return g, nil
}

func newProp(name string, required bool, g *Generator, desc string) prop {
	q := AppendJSONString(nil, name)
	return prop{name: name, norm: strings.Join(nameWords(name), ""), desc: descWords(desc), quoted: append(q, ':'), required: required, gen: g}
}

func resolveRef(ref string, root any) (any, error) {
	if ref == "#" {
		return root, nil
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q: only local references are supported", ref)
	}
	cur := root
	for part := range strings.SplitSeq(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

// maxCount caps lengths and item counts, so that a schema asking for a
// billion items cannot exhaust memory; no realistic answer is that big.
const maxCount = 10000

// count reads a non-negative integer keyword, capped at maxCount.
func count(n map[string]any, key string, def int) int {
	f, ok := n[key].(float64)
	if !ok || !(f >= 0) {
		return def
	}
	return int(min(f, maxCount))
}

func num(n map[string]any, key string, def float64) float64 {
	if f, ok := n[key].(float64); ok {
		return f
	}
	return def
}

// resolve follows aliases to the generator that writes values.
func (g *Generator) resolve() *Generator {
	for g.alias != nil {
		g = g.alias
	}
	return g
}

// AppendValue appends a valid value. Properties of scalar type take the
// values gv gives them (see [Given]); gv may be nil.
func (g *Generator) AppendValue(buf []byte, r *RNG, gv *Given) []byte {
	return g.gen(buf, r, gv, nil, 0)
}

// gen appends a value; p is the property it is the value of, nil if none.
func (g *Generator) gen(buf []byte, r *RNG, gv *Given, p *prop, depth int) []byte {
	if depth > maxGenDepth {
		return append(buf, "null"...)
	}
	if g.alias != nil {
		g = g.resolve()
	}
	if p != nil && gv != nil && g.kind != kindObject && g.kind != kindArray && g.kind != kindNull {
		for v := range gv.lookup(p) {
			if out, ok := g.appendGiven(buf, v); ok {
				return out
			}
		}
	}
	if len(g.fixed) > 0 {
		return append(buf, g.fixed[r.intN(len(g.fixed))]...)
	}
	if g.hint != nil {
		return append(buf, g.hint...)
	}
	switch g.kind {
	case kindObject:
		return g.object(buf, r, gv, depth, -1, "")
	case kindArray:
		return g.array(buf, r, gv, depth)
	case kindString:
		return g.str(buf, r)
	case kindInteger:
		return g.integer(buf, r)
	case kindNumber:
		return g.number(buf, r)
	case kindBoolean:
		if r.intN(2) == 1 {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case kindNull:
		return append(buf, "null"...)
	default:
		buf = append(buf, '"')
		buf = AppendSentence(buf, r, 2)
		return append(buf, '"')
	}
}

// object appends an object. The property at index skip (if any) is left
// out, or given the JSON text bad when that is not empty.
func (g *Generator) object(buf []byte, r *RNG, gv *Given, depth, skip int, bad string) []byte {
	buf = append(buf, '{')
	first := true
	for i := range g.props {
		p := &g.props[i]
		// Optional properties are filled too, unless nesting runs deep.
		if i == skip && bad == "" || depth >= fillDepth && !p.required {
			continue
		}
		if len(buf) > maxBytes {
			break
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, p.quoted...)
		if i == skip {
			buf = append(buf, bad...)
			continue
		}
		buf = p.gen.gen(buf, r, gv, p, depth+1)
	}
	return append(buf, '}')
}

func (g *Generator) array(buf []byte, r *RNG, gv *Given, depth int) []byte {
	lo := g.minPref
	if depth >= fillDepth {
		lo = g.minItems // keeps recursive schemas finite
	}
	n := lo
	if len(g.prefix) > 0 {
		n = max(lo, min(len(g.prefix), g.maxItems))
	} else if g.maxItems > lo && depth < fillDepth {
		n += r.intN(g.maxItems - lo + 1)
	}
	if g.noExtra {
		n = min(n, len(g.prefix))
	}
	var starts []int // offsets of the items written, for uniqueItems
	written := 0
	buf = append(buf, '[')
	for i := range n {
		if len(buf) > maxBytes {
			break
		}
		mark := len(buf)
		if written > 0 {
			buf = append(buf, ',')
		}
		start := len(buf)
		kept := true
		for try := 0; ; try++ {
			buf = g.item(buf[:start], r, gv, depth, i)
			if !g.unique || !duplicate(buf, starts, start) {
				break
			}
			if try == 8 {
				// Give up on this item (a prefix item keeps its place).
				kept = i < len(g.prefix)
				break
			}
		}
		if !kept {
			buf = buf[:mark]
			continue
		}
		written++
		if g.unique {
			starts = append(starts, start)
		}
	}
	return append(buf, ']')
}

func (g *Generator) item(buf []byte, r *RNG, gv *Given, depth, i int) []byte {
	switch {
	case i < len(g.prefix):
		return g.prefix[i].gen(buf, r, gv, nil, depth+1)
	case g.items != nil:
		return g.items.gen(buf, r, gv, nil, depth+1)
	default:
		return strconv.AppendInt(buf, int64(r.intN(100)), 10)
	}
}

// duplicate reports whether the item buf[start:] equals an earlier one.
// Generated JSON is canonical (sorted keys, one spelling per number), so
// equal values have equal texts.
func duplicate(buf []byte, starts []int, start int) bool {
	item := buf[start:]
	for j, s := range starts {
		end := start - 1 // the comma before the new item
		if j+1 < len(starts) {
			end = starts[j+1] - 1
		}
		if bytes.Equal(buf[s:end], item) {
			return true
		}
	}
	return false
}

// bounds returns the range a number is drawn from: the schema's bounds,
// with 100 wide defaults.
func (g *Generator) bounds() (lo, hi float64) {
	lo, hi = 0, 100
	switch {
	case !math.IsNaN(g.min) && !math.IsNaN(g.max):
		lo, hi = g.min, g.max
	case !math.IsNaN(g.min):
		lo, hi = g.min, g.min+100
	case !math.IsNaN(g.max):
		lo, hi = min(0, g.max-100), g.max
	}
	return lo, max(lo, hi)
}

func (g *Generator) inRange(x float64) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return false
	}
	lo, hi := g.bounds()
	if g.exclMin && !math.IsNaN(g.min) && x <= lo || x < lo {
		return false
	}
	if g.exclMax && !math.IsNaN(g.max) && x >= hi || x > hi {
		return false
	}
	return true
}

func (g *Generator) integer(buf []byte, r *RNG) []byte {
	lo, hi := g.bounds()
	ilo, ihi := math.Ceil(lo), math.Floor(hi)
	if g.exclMin && ilo <= lo {
		ilo++
	}
	if g.exclMax && ihi >= hi {
		ihi--
	}
	step := 1.0
	if g.multipleOf > 0 && g.multipleOf == math.Trunc(g.multipleOf) {
		step = g.multipleOf
		ilo, ihi = math.Ceil(ilo/step), math.Floor(ihi/step)
	}
	if ihi < ilo {
		ihi = ilo
	}
	var x float64
	switch span := ihi - ilo + 1; {
	case span < 1<<62:
		x = ilo + float64(r.uint64N(uint64(span)))
	case !math.IsInf(ihi-ilo, 0):
		x = ilo + math.Floor(r.Float64()*(ihi-ilo))
	default:
		x = math.Floor(ilo/2 + ihi/2)
	}
	return strconv.AppendFloat(buf, x*step, 'f', 0, 64)
}

func (g *Generator) number(buf []byte, r *RNG) []byte {
	lo, hi := g.bounds()
	if m := g.multipleOf; m > 0 {
		klo, khi := math.Ceil(lo/m), math.Floor(hi/m)
		if g.exclMin && klo*m <= lo {
			klo++
		}
		if g.exclMax && khi*m >= hi {
			khi--
		}
		if khi >= klo && khi-klo < 1<<62 {
			k := klo + float64(r.uint64N(uint64(khi-klo+1)))
			return strconv.AppendFloat(buf, k*m, 'f', g.multDecimals, 64)
		}
	}
	x := lo + r.Float64()*(hi-lo)
	if rx := math.Round(x*100) / 100; g.inRange(rx) && !math.IsInf(rx, 0) {
		x = rx
	} else if !g.inRange(x) {
		x = lo/2 + hi/2
	}
	return strconv.AppendFloat(buf, x, 'f', -1, 64)
}

func (g *Generator) str(buf []byte, r *RNG) []byte {
	buf = append(buf, '"')
	start := len(buf)
	switch g.format {
	case "date":
		buf = fmt.Appendf(buf, "2026-%02d-%02d", 1+r.intN(12), 1+r.intN(28))
	case "date-time":
		buf = fmt.Appendf(buf, "2026-%02d-%02dT%02d:%02d:00Z", 1+r.intN(12), 1+r.intN(28), r.intN(24), r.intN(60))
	case "time":
		buf = fmt.Appendf(buf, "%02d:%02d:00Z", r.intN(24), r.intN(60))
	case "duration":
		buf = fmt.Appendf(buf, "P%dD", 1+r.intN(30))
	case "email", "idn-email":
		buf = append(append(buf, words[r.intN(len(words))]...), "@example.com"...)
	case "hostname", "idn-hostname":
		buf = append(append(buf, words[r.intN(len(words))]...), ".example.com"...)
	case "uri", "url", "iri", "uri-reference", "iri-reference":
		buf = append(append(buf, "https://example.com/"...), words[r.intN(len(words))]...)
	case "uuid":
		buf = fmt.Appendf(buf, "%08x-%04x-4%03x-8%03x-%012x",
			r.src.Uint64()&0xffffffff, r.intN(1<<16), r.intN(1<<12), r.intN(1<<12), r.src.Uint64()&(1<<48-1))
	case "ipv4":
		buf = fmt.Appendf(buf, "10.%d.%d.%d", r.intN(256), r.intN(256), 1+r.intN(254))
	case "ipv6":
		buf = fmt.Appendf(buf, "fd00::%x", 1+r.intN(0xfffe))
	default:
		buf = AppendSentence(buf, r, 1+r.intN(3))
		for len(buf)-start < g.minLen {
			buf = append(append(buf, ' '), words[r.intN(len(words))]...)
		}
		if g.maxLen >= 0 && len(buf)-start > g.maxLen {
			buf = buf[:start+g.maxLen] // words are ASCII: bytes are characters
		}
	}
	return append(buf, '"')
}

// AppendInvalid appends a value that violates the schema: a required
// property is left out, or a value gets the wrong type.
func (g *Generator) AppendInvalid(buf []byte, r *RNG) []byte {
	g = g.resolve()
	if g.kind != kindObject || len(g.fixed) > 0 {
		if g.kind == kindString {
			return append(buf, "42"...)
		}
		return append(buf, `"not the requested JSON"`...)
	}
	for i, p := range g.props {
		if p.required {
			return g.object(buf, r, nil, 0, i, "")
		}
	}
	for i, p := range g.props {
		var bad string
		switch pg := p.gen.resolve(); {
		case len(pg.fixed) > 0:
			bad = `{"not":"an allowed value"}`
		case pg.kind == kindInteger || pg.kind == kindNumber || pg.kind == kindBoolean:
			bad = `"oops"`
		case pg.kind == kindString:
			bad = "7"
		default:
			continue
		}
		return g.object(buf, r, nil, 0, i, bad)
	}
	return append(buf, `["not","an","object"]`...)
}

// AppendJSONString appends s as a JSON string.
func AppendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s) // rare: escapes and non-ASCII
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// isWordByte reports whether c may be part of a field's name in a task's
// text.
func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

var words = []string{
	"alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor",
	"iris", "juniper", "kepler", "lumen", "maple", "nova", "orbit", "prism",
	"quartz", "raven", "sierra", "tundra", "umber", "vertex", "willow", "xenon",
	"yonder", "zephyr",
}

// AppendSentence appends n random words separated by spaces.
func AppendSentence(buf []byte, r *RNG, n int) []byte {
	for i := range n {
		if i > 0 {
			buf = append(buf, ' ')
		}
		buf = append(buf, words[r.intN(len(words))]...)
	}
	return buf
}
