package schema_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/schema"
)

// refCycles are schemas whose references loop without descending into the
// instance, with the cycle Compile must name.
var refCycles = []struct {
	name   string
	schema string
	path   []string
}{
	{
		"two definitions",
		`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`,
		[]string{"#/$defs/a", "$ref→", "#/$defs/b", "$ref→", "#/$defs/a"},
	},
	{
		"two definitions nothing refers to",
		`{"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}`,
		[]string{"#/$defs/a", "$ref→", "#/$defs/b", "$ref→", "#/$defs/a"},
	},
	{"root refers to itself", `{"$ref": "#"}`, []string{"#", "$ref→", "#"}},
	{
		"through allOf",
		`{"type": "object", "allOf": [{"required": ["a"]}, {"$ref": "#"}]}`,
		[]string{"#", "allOf/1→", "#/allOf/1", "$ref→", "#"},
	},
	{
		"through anyOf and oneOf",
		`{"$defs": {"x": {"anyOf": [{"type": "string"}, {"oneOf": [{"$ref": "#/$defs/x"}]}]}}, "properties": {"p": {"$ref": "#/$defs/x"}}}`,
		[]string{"#/$defs/x", "anyOf/1→", "#/$defs/x/anyOf/1", "oneOf/0→", "#/$defs/x/anyOf/1/oneOf/0", "$ref→", "#/$defs/x"},
	},
	{"through not", `{"not": {"$ref": "#"}}`, []string{"#", "not→", "#/not", "$ref→", "#"}},
	{
		"through if, then and else",
		`{"$defs": {"c": {"if": {"type": "string"}, "then": {"$ref": "#/$defs/d"}}, "d": {"if": {"type": "number"}, "else": {"$ref": "#/$defs/c"}}}, "$ref": "#/$defs/c"}`,
		[]string{"#/$defs/c", "then→", "#/$defs/c/then", "$ref→", "#/$defs/d", "else→", "#/$defs/d/else", "$ref→", "#/$defs/c"},
	},
	{
		"through dependentSchemas",
		`{"dependentSchemas": {"a": {"$ref": "#"}}}`,
		[]string{"#", "dependentSchemas/a→", "#/dependentSchemas/a", "$ref→", "#"},
	},
	{
		"below a property",
		`{"properties": {"p": {"$defs": {"q": {"$ref": "#/properties/p"}}, "allOf": [{"$ref": "#/properties/p/$defs/q"}]}}}`,
		[]string{"#/properties/p", "allOf/0→", "#/properties/p/allOf/0", "$ref→", "#/properties/p/$defs/q", "$ref→", "#/properties/p"},
	},
	{
		"anchor",
		`{"$defs": {"a": {"$anchor": "top", "allOf": [{"$ref": "#top"}]}}, "$ref": "#/$defs/a"}`,
		[]string{"#/$defs/a", "allOf/0→", "#/$defs/a/allOf/0", "$ref→", "#/$defs/a"},
	},
	{
		"dynamic reference with its anchor on one schema only",
		`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$dynamicAnchor": "meta", "allOf": [{"$dynamicRef": "#meta"}]}`,
		[]string{"#", "allOf/0→", "#/allOf/0", "$dynamicRef→", "#"},
	},
	{
		"draft 7 definitions",
		`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"$ref": "#/definitions/a"}}}`,
		[]string{"#/definitions/a", "$ref→", "#/definitions/a"},
	},
}

func TestCompileRejectsRefCycle(t *testing.T) {
	t.Parallel()
	for _, tt := range refCycles {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(tt.schema))
			if err == nil {
				t.Fatalf("Compile(%s) = nil error, want a reference cycle error (Validate({}) = %v)", tt.schema, s.Validate([]byte(`{}`)))
			}
			if !errors.Is(err, schema.ErrRefCycle) {
				t.Fatalf("Compile(%s) error %v, want one wrapping ErrRefCycle", tt.schema, err)
			}
			ce, ok := errors.AsType[*schema.RefCycleError](err)
			if !ok {
				t.Fatalf("Compile(%s) error %v, want a *RefCycleError", tt.schema, err)
			}
			if diff := cmp.Diff(tt.path, ce.Path); diff != "" {
				t.Errorf("Compile(%s) cycle path mismatch (-want +got):\n%s", tt.schema, diff)
			}
			want := "schema: invalid schema: reference cycle that never descends into the instance: " + strings.Join(tt.path, " ")
			if err.Error() != want {
				t.Errorf("Compile(%s) error = %q, want %q", tt.schema, err, want)
			}
		})
	}
}

// TestCompileAcceptsRecursion checks that schemas that refer back to
// themselves below a property or item, descending into the instance, still
// compile and validate nested documents.
func TestCompileAcceptsRecursion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		valid  string
		broken string // invalid deep down
	}{
		{
			"tree through items",
			`{"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}`,
			`{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}`,
			`{"name": "a", "children": [{"name": "b", "children": [{}]}]}`,
		},
		{
			"linked list through a definition and allOf",
			`{"$defs": {"node": {"allOf": [{"type": "object"}], "properties": {"next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}}}}, "$ref": "#/$defs/node"}`,
			`{"next": {"next": {"next": null}}}`,
			`{"next": {"next": {"next": 3}}}`,
		},
		{
			"mutual recursion through additionalProperties and prefixItems",
			`{"$defs": {"o": {"type": "object", "additionalProperties": {"$ref": "#/$defs/a"}}, "a": {"type": "array", "prefixItems": [{"$ref": "#/$defs/o"}]}}, "$ref": "#/$defs/o"}`,
			`{"x": [{"y": [{}]}]}`,
			`{"x": [{"y": [1]}]}`,
		},
		{
			// inner's $dynamicRef resolves to itself statically, but to
			// the outermost schema with the anchor x in the dynamic scope
			// (the root) when validating: it never loops.
			"dynamic reference resolved in the dynamic scope",
			`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/outer", "$dynamicAnchor": "x", "type": ["object", "string"], "properties": {"a": {"$ref": "inner"}}, "$defs": {"inner": {"$id": "inner", "$dynamicAnchor": "x", "allOf": [{"$dynamicRef": "#x"}]}}}`,
			`{"a": "s"}`,
			`{"a": 3}`,
		},
		{
			"recursive reference resolved in the dynamic scope",
			`{"$schema": "https://json-schema.org/draft/2019-09/schema", "$id": "https://example.com/outer", "$recursiveAnchor": true, "type": ["object", "string"], "properties": {"a": {"$ref": "inner"}}, "$defs": {"inner": {"$id": "inner", "$recursiveAnchor": true, "allOf": [{"$recursiveRef": "#"}]}}}`,
			`{"a": "s"}`,
			`{"a": 3}`,
		},
		{
			"the same definition twice in place is not a cycle",
			`{"$defs": {"s": {"type": "string"}}, "allOf": [{"$ref": "#/$defs/s"}, {"$ref": "#/$defs/s"}], "anyOf": [{"$ref": "#/$defs/s"}]}`,
			`"x"`,
			`1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatalf("Compile(%s) = %v, want nil", tt.schema, err)
			}
			if err := s.Validate([]byte(tt.valid)); err != nil {
				t.Errorf("Validate(%s) = %v, want nil", tt.valid, err)
			}
			if err := s.Validate([]byte(tt.broken)); err == nil {
				t.Errorf("Validate(%s) = nil, want an error", tt.broken)
			}
		})
	}
}

// FuzzCompile checks that Compile never panics, and that a schema it
// accepts never sends the validator into a reference cycle.
func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSchemas {
		f.Add([]byte(s))
	}
	for _, c := range refCycles {
		f.Add([]byte(c.schema))
	}
	f.Add([]byte(`{"properties": {"children": {"items": {"$ref": "#"}}}}`))
	f.Add([]byte(`{"$defs": {"a": {"$ref": "#/$defs/missing"}}, "$ref": "#/$defs/a"}`))
	f.Add([]byte(`{"$dynamicAnchor": "n", "anyOf": [{"$dynamicRef": "#n"}]}`))
	f.Add([]byte(`{"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": true, "allOf": [{"$recursiveRef": "#"}]}`))
	docs := []string{`{}`, `[]`, `"a"`, `1`, `null`, `{"a": {"b": [1, {"c": "d"}]}, "children": [{}]}`}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := schema.Compile(raw)
		if err != nil {
			if ce, ok := errors.AsType[*schema.RefCycleError](err); ok && len(ce.Path) < 3 {
				t.Fatalf("Compile(%q) cycle %v, want at least one step", raw, ce.Path)
			}
			return
		}
		for _, doc := range docs {
			verr, ok := errors.AsType[*schema.ValidationError](s.Validate([]byte(doc)))
			if !ok {
				continue
			}
			for _, p := range verr.Problems {
				if strings.Contains(p.Message, "reference cycle") {
					t.Fatalf("Compile(%q) accepted a schema that loops on %s: %s", raw, doc, p.Message)
				}
			}
		}
	})
}
