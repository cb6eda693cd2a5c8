package schema

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrRefCycle is wrapped by the error of [Compile] for a schema whose
// references loop without descending into the instance: "$ref": "#" at the
// root, two definitions referring to each other, or a loop through allOf,
// anyOf, oneOf, not, if, then, else or dependentSchemas. Validating against
// such a schema could never finish, so every document would fail. A schema
// that recurses into the instance (a tree whose "children" items refer back
// to "#") is not a cycle and compiles, nor is a loop through a $dynamicRef
// or $recursiveRef that validation may resolve, in the dynamic scope, to
// another schema with the same anchor.
var ErrRefCycle = errors.New("reference cycle")

// RefCycleError reports a reference cycle found by [Compile]. It wraps
// [ErrRefCycle].
type RefCycleError struct {
	// Path lists the locations of the schemas of the cycle within the
	// document ("#", "#/$defs/a"), each followed by the keyword that leads
	// to the next one, and ends with the first location again.
	Path []string
}

// Error returns e.g. `reference cycle that never descends into the
// instance: #/$defs/a $ref→ #/$defs/b $ref→ #/$defs/a`.
func (e *RefCycleError) Error() string {
	return "reference cycle that never descends into the instance: " + strings.Join(e.Path, " ")
}

// Unwrap returns [ErrRefCycle].
func (e *RefCycleError) Unwrap() error { return ErrRefCycle }

// edge is a subschema applied by a keyword.
type edge struct {
	kw string // keyword, with its index or name: "$ref", "allOf/1"
	to *jsonschema.Schema
	// dynamic says that to is only the initial target of a $dynamicRef
	// or $recursiveRef: validation goes to the outermost schema in the
	// dynamic scope with the same $dynamicAnchor (or $recursiveAnchor),
	// which may be another one.
	dynamic bool
}

// inPlace returns the subschemas that s applies to the same instance
// location as s itself.
func inPlace(s *jsonschema.Schema) []edge {
	var es []edge
	add := func(kw string, to *jsonschema.Schema) {
		if to != nil {
			es = append(es, edge{kw: kw, to: to})
		}
	}
	add("$ref", s.Ref)
	if to := s.RecursiveRef; to != nil {
		es = append(es, edge{"$recursiveRef", to, to.RecursiveAnchor})
	}
	if d := s.DynamicRef; d != nil && d.Ref != nil {
		es = append(es, edge{"$dynamicRef", d.Ref, d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor})
	}
	for _, l := range []struct {
		kw string
		ss []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		for i, x := range l.ss {
			add(fmt.Sprintf("%s/%d", l.kw, i), x)
		}
	}
	add("not", s.Not)
	add("if", s.If)
	add("then", s.Then)
	add("else", s.Else)
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		add("dependentSchemas/"+k, s.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if x, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add("dependencies/"+k, x)
		}
	}
	return es
}

// descending returns the subschemas that s applies to parts of the instance
// (properties, items...), which end any recursion at the instance's depth.
func descending(s *jsonschema.Schema) []*jsonschema.Schema {
	var ss []*jsonschema.Schema
	add := func(xs ...any) {
		for _, x := range xs {
			switch x := x.(type) {
			case *jsonschema.Schema:
				if x != nil {
					ss = append(ss, x)
				}
			case []*jsonschema.Schema:
				ss = append(ss, x...)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		add(s.Properties[k])
	}
	for _, x := range s.PatternProperties {
		add(x)
	}
	add(s.PropertyNames, s.AdditionalProperties, s.UnevaluatedProperties,
		s.Contains, s.Items, s.AdditionalItems, s.PrefixItems, s.Items2020,
		s.UnevaluatedItems, s.ContentSchema)
	return ss
}

// reachable returns the schemas reachable from roots through both kinds
// of edges, in breadth-first order.
func reachable(roots []*jsonschema.Schema) []*jsonschema.Schema {
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		all = append(all, s)
		for _, e := range inPlace(s) {
			queue = append(queue, e.to)
		}
		queue = append(queue, descending(s)...)
	}
	return all
}

// findCycle returns the first reference cycle among the schemas reachable
// from roots, or nil. A cycle is a loop of in-place edges only. A dynamic
// edge ($dynamicRef, $recursiveRef) counts only when its initial target is
// the one schema with its anchor: otherwise validation may resolve it to
// another one, and the loop is not certain.
func findCycle(roots ...*jsonschema.Schema) *RefCycleError {
	all := reachable(roots)
	var (
		dynamicAnchors  = map[string]int{} // schemas with each $dynamicAnchor
		recursiveAnchor int                // schemas with $recursiveAnchor true
	)
	for _, s := range all {
		if s.DynamicAnchor != "" {
			dynamicAnchors[s.DynamicAnchor]++
		}
		if s.RecursiveAnchor {
			recursiveAnchor++
		}
	}
	certain := func(e edge) bool {
		switch {
		case !e.dynamic:
			return true
		case e.kw == "$recursiveRef":
			return recursiveAnchor <= 1
		default:
			return dynamicAnchors[e.to.DynamicAnchor] <= 1
		}
	}

	const (
		unseen = iota
		open   // on the in-place DFS stack
		done   // no cycle through it
	)
	state := map[*jsonschema.Schema]int{}
	var stack []*jsonschema.Schema // in-place path from the DFS root
	var kws []string               // kws[i] leads from stack[i] to stack[i+1]
	var cycle *RefCycleError

	var visit func(s *jsonschema.Schema) bool
	visit = func(s *jsonschema.Schema) bool {
		state[s] = open
		stack = append(stack, s)
		for _, e := range inPlace(s) {
			if !certain(e) {
				continue
			}
			kws = append(kws, e.kw)
			switch state[e.to] {
			case open:
				i := slices.Index(stack, e.to)
				var path []string
				for j := i; j < len(stack); j++ {
					path = append(path, location(stack[j]), kws[j]+"→")
				}
				cycle = &RefCycleError{Path: append(path, location(e.to))}
				return false
			case unseen:
				if !visit(e.to) {
					return false
				}
			}
			kws = kws[:len(kws)-1]
		}
		stack = stack[:len(stack)-1]
		state[s] = done
		return true
	}

	// Every reachable schema starts an in-place search.
	for _, s := range all {
		if state[s] == unseen && !visit(s) {
			return cycle
		}
	}
	return nil
}

// location returns where s is in the schema document, as a URI fragment
// ("#/$defs/a"), or its full location when it is elsewhere.
func location(s *jsonschema.Schema) string {
	if loc, ok := strings.CutPrefix(s.Location, schemaURL); ok {
		return loc
	}
	return s.Location
}

// definitions returns the fragments of the schemas under the document's
// top-level "$defs" and "definitions", which are compiled, and checked for
// cycles, even when nothing refers to them.
func definitions(doc any) []string {
	m, _ := doc.(map[string]any)
	var frags []string
	for _, kw := range []string{"$defs", "definitions"} {
		defs, _ := m[kw].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(defs)) {
			frags = append(frags, "#/"+kw+"/"+escapePointer(name))
		}
	}
	return frags
}

// escapePointer escapes a JSON Pointer token (RFC 6901) for use in a URI
// fragment.
func escapePointer(tok string) string {
	tok = strings.ReplaceAll(tok, "~", "~0")
	tok = strings.ReplaceAll(tok, "/", "~1")
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~$!&'()*+,;=:@", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
