package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// generator produces JSON values (as Go values ready for json.Marshal) that
// satisfy one JSON Schema node. It is compiled once per schema and is
// immutable afterwards.
type generator struct {
	kind     string // "object", "array", "string", "integer", "number", "boolean", "null", "any"
	fixed    []any  // const or enum values: pick one
	hint     any    // default or first example: used as is
	props    []prop // object properties, in schema order
	required map[string]bool
	items    *generator
	minItems int
	maxItems int
	minLen   int
	maxLen   int
	min, max float64
	format   string
}

type prop struct {
	name string
	gen  *generator
}

// compile builds a generator from a schema document. Local references
// ("#/$defs/x", "#/definitions/x") are followed; anything else a value can
// be generated for without it is accepted.
func compile(raw json.RawMessage) (*generator, error) {
	if len(raw) == 0 {
		return &generator{kind: "object"}, nil
	}
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	return compileNode(root, root, 0)
}

const maxDepth = 32

func compileNode(node, root any, depth int) (*generator, error) {
	if depth > maxDepth {
		return nil, errors.New("schema nests too deeply (recursive $ref?)")
	}
	switch n := node.(type) {
	case bool:
		return &generator{kind: "any"}, nil
	case map[string]any:
		return compileObject(n, root, depth)
	default:
		return nil, fmt.Errorf("schema node is %T, want an object", node)
	}
}

func compileObject(n map[string]any, root any, depth int) (*generator, error) {
	if ref, ok := n["$ref"].(string); ok {
		target, err := resolveRef(ref, root)
		if err != nil {
			return nil, err
		}
		return compileNode(target, root, depth+1)
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := n[key].([]any); ok && len(alts) > 0 {
			// The first alternative is valid for anyOf and oneOf; for allOf
			// it is a reasonable approximation for the simple schemas used
			// in practice.
			return compileNode(alts[0], root, depth+1)
		}
	}
	g := &generator{maxItems: 3, maxLen: 0, max: math.NaN(), min: math.NaN()}
	if c, ok := n["const"]; ok {
		g.fixed = []any{c}
	}
	if e, ok := n["enum"].([]any); ok && len(e) > 0 {
		g.fixed = e
	}
	if d, ok := n["default"]; ok {
		g.hint = d
	} else if ex, ok := n["examples"].([]any); ok && len(ex) > 0 {
		g.hint = ex[0]
	}
	switch t := n["type"].(type) {
	case string:
		g.kind = t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				g.kind = s
				break
			}
		}
	}
	if g.kind == "" {
		switch {
		case n["properties"] != nil:
			g.kind = "object"
		case n["items"] != nil:
			g.kind = "array"
		default:
			g.kind = "any"
		}
	}
	g.format, _ = n["format"].(string)
	g.min = num(n, "minimum", math.NaN())
	g.max = num(n, "maximum", math.NaN())
	if v := num(n, "exclusiveMinimum", math.NaN()); !math.IsNaN(v) {
		g.min = v + 1
	}
	if v := num(n, "exclusiveMaximum", math.NaN()); !math.IsNaN(v) {
		g.max = v - 1
	}
	g.minLen = int(num(n, "minLength", 0))
	g.maxLen = int(num(n, "maxLength", 0))
	g.minItems = int(num(n, "minItems", 1))
	g.maxItems = int(num(n, "maxItems", float64(max(g.minItems, 3))))

	if props, ok := n["properties"].(map[string]any); ok {
		g.required = map[string]bool{}
		if req, ok := n["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					g.required[s] = true
				}
			}
		}
		for _, name := range sortedKeys(props) {
			pg, err := compileNode(props[name], root, depth+1)
			if err != nil {
				return nil, fmt.Errorf("property %q: %w", name, err)
			}
			g.props = append(g.props, prop{name: name, gen: pg})
		}
	}
	if items, ok := n["items"]; ok {
		ig, err := compileNode(items, root, depth+1)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		g.items = ig
	}
	return g, nil
}

func resolveRef(ref string, root any) (any, error) {
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

func num(n map[string]any, key string, def float64) float64 {
	if f, ok := n[key].(float64); ok {
		return f
	}
	return def
}

// sortedKeys returns the keys in a fixed order (JSON object key order is
// lost by decoding into a map).
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Insertion sort: schemas have few properties.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// value generates a valid value. task is the user's message: string
// properties named in it as "name: value" or "name=value" take that value.
func (g *generator) value(rng *rand.Rand, task string) any {
	return g.gen(rng, task, "", 0)
}

func (g *generator) gen(rng *rand.Rand, task, name string, depth int) any {
	if len(g.fixed) > 0 {
		return g.fixed[rng.IntN(len(g.fixed))]
	}
	if g.kind == "string" && name != "" && task != "" {
		if v, ok := lookup(task, name); ok {
			return v
		}
	}
	if g.hint != nil {
		return g.hint
	}
	switch g.kind {
	case "object":
		obj := make(map[string]any, len(g.props))
		for _, p := range g.props {
			// Optional properties are filled too, unless nesting runs deep.
			if depth > 4 && !g.required[p.name] {
				continue
			}
			obj[p.name] = p.gen.gen(rng, task, p.name, depth+1)
		}
		return obj
	case "array":
		n := g.minItems
		if g.maxItems > g.minItems {
			n += rng.IntN(g.maxItems - g.minItems + 1)
		}
		arr := make([]any, n)
		for i := range arr {
			if g.items == nil {
				arr[i] = rng.IntN(100)
				continue
			}
			arr[i] = g.items.gen(rng, task, "", depth+1)
		}
		return arr
	case "string":
		return g.str(rng)
	case "integer":
		lo, hi := g.bounds(0, 100)
		span := max(int64(math.Floor(hi)-math.Ceil(lo))+1, 1)
		return int64(math.Ceil(lo)) + rng.Int64N(span)
	case "number":
		lo, hi := g.bounds(0, 100)
		return math.Round((lo+rng.Float64()*(hi-lo))*100) / 100
	case "boolean":
		return rng.IntN(2) == 1
	case "null":
		return nil
	default:
		return sentence(rng, 2)
	}
}

func (g *generator) bounds(lo, hi float64) (float64, float64) {
	if !math.IsNaN(g.min) {
		lo = g.min
		if math.IsNaN(g.max) {
			hi = lo + 100
		}
	}
	if !math.IsNaN(g.max) {
		hi = g.max
		if math.IsNaN(g.min) {
			lo = min(lo, hi-100)
		}
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

func (g *generator) str(rng *rand.Rand) string {
	switch g.format {
	case "date":
		return fmt.Sprintf("2026-%02d-%02d", 1+rng.IntN(12), 1+rng.IntN(28))
	case "date-time":
		return fmt.Sprintf("2026-%02d-%02dT%02d:%02d:00Z", 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60))
	case "email":
		return words[rng.IntN(len(words))] + "@example.com"
	case "uri", "url":
		return "https://example.com/" + words[rng.IntN(len(words))]
	}
	s := sentence(rng, 1+rng.IntN(3))
	for len(s) < g.minLen {
		s += " " + words[rng.IntN(len(words))]
	}
	if g.maxLen > 0 && len(s) > g.maxLen {
		s = s[:g.maxLen]
	}
	return s
}

// invalid returns a variant of v that violates the schema: a required
// property is dropped, or a value gets the wrong type.
func (g *generator) invalid(v any) any {
	obj, ok := v.(map[string]any)
	if !ok || g.kind != "object" {
		if g.kind == "string" {
			return 42
		}
		return "not the requested JSON"
	}
	for _, p := range g.props {
		if g.required[p.name] {
			delete(obj, p.name)
			return obj
		}
	}
	for _, p := range g.props {
		if p.gen.kind == "integer" || p.gen.kind == "number" || p.gen.kind == "boolean" {
			obj[p.name] = "oops"
			return obj
		}
		if p.gen.kind == "string" {
			obj[p.name] = 7
			return obj
		}
	}
	return []any{"not", "an", "object"}
}

// lookup finds "name: value" or "name=value" in text and returns value up
// to the next whitespace (quotes and a trailing period, comma or
// semicolon are trimmed).
func lookup(text, name string) (string, bool) {
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return "", false
		}
		start := i + j
		end := start + len(name)
		i = end
		if start > 0 && isWordByte(text[start-1]) {
			continue
		}
		rest := text[end:]
		switch {
		case strings.HasPrefix(rest, ": "):
			rest = rest[2:]
		case strings.HasPrefix(rest, ":"), strings.HasPrefix(rest, "="):
			rest = rest[1:]
		default:
			continue
		}
		k := strings.IndexAny(rest, " \t\r\n")
		if k >= 0 {
			rest = rest[:k]
		}
		rest = strings.TrimRight(strings.Trim(rest, "\"'`"), ".,;")
		rest = strings.Trim(rest, "\"'`")
		if rest != "" {
			return rest, true
		}
	}
	return "", false
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

var words = []string{
	"alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor",
	"iris", "juniper", "kepler", "lumen", "maple", "nova", "orbit", "prism",
	"quartz", "raven", "sierra", "tundra", "umber", "vertex", "willow", "xenon",
	"yonder", "zephyr",
}

func sentence(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}
