package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/schema"
)

// personSchema exercises paths, nesting and most keyword kinds.
const personSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "age": {"type": "integer", "minimum": 0},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "pets": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {"kind": {"type": "string"}, "name": {"type": "string"}},
        "required": ["kind"]
      }
    },
    "nickname": {"type": ["string", "null"]},
    "odd key": {"type": "boolean"},
    "meta": {"type": "object", "additionalProperties": {"type": "integer"}}
  },
  "required": ["name", "age"],
  "additionalProperties": false
}`

func TestValidate(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, personSchema)
	tests := []struct {
		name string
		doc  string
		want []schema.Problem // nil: valid
	}{
		{name: "valid minimal", doc: `{"name": "Ada", "age": 36}`},
		{
			name: "valid full",
			doc: `{"name": "Ada", "age": 36, "color": "green", "tags": ["a", "b"],
				"pets": [{"kind": "cat", "name": "Tom"}], "nickname": null, "odd key": true, "meta": {"x": 1}}`,
		},
		{name: "integer written as a decimal", doc: `{"name": "Ada", "age": 36.0}`},
		{name: "big integer", doc: `{"name": "Ada", "age": 123456789012345678901234567890}`},
		{name: "escaped member name", doc: `{"n\u0061me": "Ada", "age": 36}`},
		{
			name: "missing required",
			doc:  `{}`,
			want: []schema.Problem{
				{Path: "$", Message: `missing required property "age"`},
				{Path: "$", Message: `missing required property "name"`},
			},
		},
		{
			name: "wrong type",
			doc:  `{"name": "Ada", "age": "36"}`,
			want: []schema.Problem{{Path: "$.age", Message: "got string, want integer"}},
		},
		{
			name: "fraction for integer",
			doc:  `{"name": "Ada", "age": 36.5}`,
			want: []schema.Problem{{Path: "$.age", Message: "got number, want integer"}},
		},
		{
			name: "below minimum",
			doc:  `{"name": "Ada", "age": -1}`,
			want: []schema.Problem{{Path: "$.age", Message: "must be >= 0, got -1"}},
		},
		{
			name: "too short",
			doc:  `{"name": "", "age": 1}`,
			want: []schema.Problem{{Path: "$.name", Message: "string is too short: 0 characters, want at least 1"}},
		},
		{
			name: "nested path with array index",
			doc:  `{"name": "Ada", "age": 36, "pets": [{"kind": "cat"}, {"name": "Rex"}, {"kind": 7}]}`,
			want: []schema.Problem{
				{Path: "$.pets[1]", Message: `missing required property "kind"`},
				{Path: "$.pets[2].kind", Message: "got number, want string"},
			},
		},
		{
			name: "additional properties",
			doc:  `{"name": "Ada", "age": 36, "zeta": 1, "extra": 2}`,
			want: []schema.Problem{
				{Path: "$", Message: `property "extra" is not allowed`},
				{Path: "$", Message: `property "zeta" is not allowed`},
			},
		},
		{
			name: "enum",
			doc:  `{"name": "Ada", "age": 36, "color": "purple"}`,
			want: []schema.Problem{{Path: "$.color", Message: `value must be one of "red", "green", "blue"; got "purple"`}},
		},
		{
			name: "odd member name",
			doc:  `{"name": "Ada", "age": 36, "odd key": "yes"}`,
			want: []schema.Problem{{Path: `$["odd key"]`, Message: "got string, want boolean"}},
		},
		{
			name: "numeric member name",
			doc:  `{"name": "Ada", "age": 36, "meta": {"0": "x"}}`,
			want: []schema.Problem{{Path: `$.meta["0"]`, Message: "got string, want integer"}},
		},
		{
			name: "one of several types",
			doc:  `{"name": "Ada", "age": 36, "nickname": 5}`,
			want: []schema.Problem{{Path: "$.nickname", Message: "got number, want null or string"}},
		},
		{
			name: "too many items",
			doc:  `{"name": "Ada", "age": 36, "tags": ["a", "b", "c", "d"]}`,
			want: []schema.Problem{{Path: "$.tags", Message: "array has 4 items, want at most 3"}},
		},
		{
			name: "root type",
			doc:  `[]`,
			want: []schema.Problem{{Path: "$", Message: "got array, want object"}},
		},
		{
			name: "every problem at once, sorted",
			doc:  `{"age": "x", "color": 1, "tags": [1], "extra": true}`,
			want: []schema.Problem{
				{Path: "$", Message: `missing required property "name"`},
				{Path: "$", Message: `property "extra" is not allowed`},
				{Path: "$.age", Message: "got string, want integer"},
				{Path: "$.color", Message: `value must be one of "red", "green", "blue"; got 1`},
				{Path: "$.tags[0]", Message: "got number, want string"},
			},
		},
		{
			name: "invalid JSON",
			doc:  `{"name":`,
			want: []schema.Problem{{Path: "$", Message: "invalid JSON at offset 8: unexpected end of JSON input"}},
		},
		{
			name: "empty document",
			doc:  ``,
			want: []schema.Problem{{Path: "$", Message: "invalid JSON at offset 0: unexpected end of JSON input"}},
		},
		{
			name: "trailing text",
			doc:  `{} x`,
			want: []schema.Problem{{Path: "$", Message: "invalid JSON at offset 4: invalid character 'x' after top-level value"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := problemsOf(t, s.Validate(json.RawMessage(tt.doc)), tt.doc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate(%s) problems mismatch (-want +got):\n%s", tt.doc, diff)
			}
		})
	}
}

// problemsOf returns the problems of a Validate or Parse error, nil for nil,
// and checks that the error is a *ValidationError whose Raw is raw.
func problemsOf(t *testing.T, err error, raw string) []schema.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	verr, ok := errors.AsType[*schema.ValidationError](err)
	if !ok {
		t.Fatalf("error %v (%T), want *schema.ValidationError", err, err)
	}
	if verr.Raw != raw {
		t.Errorf("ValidationError.Raw = %q, want %q", verr.Raw, raw)
	}
	if len(verr.Problems) == 0 {
		t.Errorf("ValidationError.Problems is empty")
	}
	return verr.Problems
}

func TestValidateKeywords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		doc    string
		want   []schema.Problem
	}{
		{
			name:   "anyOf of objects notes the option",
			schema: `{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}`,
			doc:    `{}`,
			want: []schema.Problem{
				{Path: "$", Message: `missing required property "a" (anyOf option 1)`},
				{Path: "$", Message: `missing required property "b" (anyOf option 2)`},
			},
		},
		{
			name:   "oneOf of types merges",
			schema: `{"properties": {"x": {"oneOf": [{"type": "string"}, {"type": "null"}]}}}`,
			doc:    `{"x": 1}`,
			want:   []schema.Problem{{Path: "$.x", Message: "got number, want string or null"}},
		},
		{
			name:   "oneOf matching twice",
			schema: `{"oneOf": [{"type": "integer"}, {"minimum": 0}]}`,
			doc:    `3`,
			want:   []schema.Problem{{Path: "$", Message: "value matches oneOf options 1 and 2, want exactly one"}},
		},
		{
			name:   "allOf lists each problem",
			schema: `{"allOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}}}]}`,
			doc:    `{"b": 1}`,
			want: []schema.Problem{
				{Path: "$", Message: `missing required property "a"`},
				{Path: "$.b", Message: "got number, want string"},
			},
		},
		{
			name:   "local reference",
			schema: `{"$defs": {"item": {"type": "object", "required": ["id"]}}, "type": "array", "items": {"$ref": "#/$defs/item"}}`,
			doc:    `[{"id": 1}, {}]`,
			want:   []schema.Problem{{Path: "$[1]", Message: `missing required property "id"`}},
		},
		{
			name:   "const",
			schema: `{"properties": {"v": {"const": "yes"}}}`,
			doc:    `{"v": "no"}`,
			want:   []schema.Problem{{Path: "$.v", Message: `value must be "yes", got "no"`}},
		},
		{
			name:   "format is asserted",
			schema: `{"properties": {"when": {"type": "string", "format": "date"}}}`,
			doc:    `{"when": "2024-02-30"}`,
			want:   []schema.Problem{{Path: "$.when", Message: `"2024-02-30" is not a valid date: parsing time "2024-02-30": day out of range`}},
		},
		{
			name:   "pattern",
			schema: `{"pattern": "^[a-z]+$"}`,
			doc:    `"ABC"`,
			want:   []schema.Problem{{Path: "$", Message: `string "ABC" does not match pattern "^[a-z]+$"`}},
		},
		{
			name:   "exclusive maximum with a decimal bound",
			schema: `{"exclusiveMaximum": 1.5}`,
			doc:    `1.5`,
			want:   []schema.Problem{{Path: "$", Message: "must be < 1.5, got 1.5"}},
		},
		{
			name:   "multipleOf",
			schema: `{"multipleOf": 5}`,
			doc:    `12`,
			want:   []schema.Problem{{Path: "$", Message: "must be a multiple of 5, got 12"}},
		},
		{
			name:   "uniqueItems",
			schema: `{"uniqueItems": true}`,
			doc:    `[1, 2, 1]`,
			want:   []schema.Problem{{Path: "$", Message: "items [0] and [2] are equal, want unique items"}},
		},
		{
			name:   "minProperties",
			schema: `{"minProperties": 2}`,
			doc:    `{"a": 1}`,
			want:   []schema.Problem{{Path: "$", Message: "object has 1 property, want at least 2"}},
		},
		{
			name:   "false schema",
			schema: `{"properties": {"secret": false}}`,
			doc:    `{"secret": 1}`,
			want:   []schema.Problem{{Path: "$.secret", Message: "no value is allowed here"}},
		},
		{
			name:   "not",
			schema: `{"not": {"type": "null"}}`,
			doc:    `null`,
			want:   []schema.Problem{{Path: "$", Message: `value must not match the "not" schema`}},
		},
		{
			name:   "contains",
			schema: `{"contains": {"type": "string"}}`,
			doc:    `[1, 2]`,
			want:   []schema.Problem{{Path: "$", Message: `no item matches the "contains" schema`}},
		},
		{
			name:   "dependentRequired",
			schema: `{"dependentRequired": {"card": ["cvv"]}}`,
			doc:    `{"card": "1234"}`,
			want:   []schema.Problem{{Path: "$", Message: `missing property "cvv", required when "card" is present`}},
		},
		{
			name:   "long value is cut short",
			schema: `{"enum": ["a"]}`,
			doc:    `"` + strings.Repeat("x", 100) + `"`,
			want:   []schema.Problem{{Path: "$", Message: `value must be "a", got "` + strings.Repeat("x", 76) + `...`}},
		},
		{
			name:   "draft-07 tuple items",
			schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}`,
			doc:    `[1, 2]`,
			want:   []schema.Problem{{Path: "$[0]", Message: "got number, want string"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			got := problemsOf(t, s.Validate(json.RawMessage(tt.doc)), tt.doc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate(%s) against %s: problems mismatch (-want +got):\n%s", tt.doc, tt.schema, diff)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		want   string // the exact error text
		syntax bool   // the error wraps a *json.SyntaxError
	}{
		{name: "empty", schema: ``, want: "schema: invalid JSON at offset 0: unexpected end of JSON input", syntax: true},
		{name: "truncated", schema: `{"type": "object"`, want: "schema: invalid JSON at offset 17: unexpected end of JSON input", syntax: true},
		{name: "trailing data", schema: `{} {}`, want: "schema: invalid JSON at offset 4: invalid character '{' after top-level value", syntax: true},
		{
			name:   "type is a number",
			schema: `{"type": 5}`,
			want: `schema: invalid schema: $.type: got number, want array (anyOf option 2); ` +
				`$.type: value must be one of "array", "boolean", "integer", "null", "number", "object", "string"; got 5 (anyOf option 1)`,
		},
		{
			name:   "negative minLength deep inside",
			schema: `{"properties": {"a b": {"items": {"minLength": -1}}}}`,
			want:   `schema: invalid schema: $.properties["a b"].items.minLength: must be >= 0, got -1`,
		},
		{
			name:   "bad regular expression",
			schema: `{"pattern": "("}`,
			want:   "schema: invalid schema: $.pattern: \"(\" is not a valid regex: error parsing regexp: missing closing ): `(`",
		},
		{
			name:   "missing local definition",
			schema: `{"$ref": "#/$defs/nope"}`,
			want:   `schema: invalid schema: json-pointer in "#/$defs/nope" not found`,
		},
		{
			name:   "remote reference",
			schema: `{"$ref": "https://example.com/item.json"}`,
			want:   `schema: invalid schema: failing loading "https://example.com/item.json": only references within the schema document are supported`,
		},
		{
			name:   "relative file reference",
			schema: `{"$ref": "item.json"}`,
			want:   `schema: invalid schema: failing loading "batchagent:///item.json": only references within the schema document are supported`,
		},
		{
			name:   "unknown meta-schema",
			schema: `{"$schema": "https://example.com/my-schema"}`,
			want:   `schema: invalid schema: failing loading "https://example.com/my-schema": only references within the schema document are supported`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(tt.schema))
			if err == nil {
				t.Fatalf("Compile(%s) = %v, nil, want error %q", tt.schema, s, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Compile(%s) error = %q, want %q", tt.schema, err, tt.want)
			}
			if _, ok := errors.AsType[*json.SyntaxError](err); ok != tt.syntax {
				t.Errorf("Compile(%s) error wraps *json.SyntaxError = %v, want %v", tt.schema, ok, tt.syntax)
			}
		})
	}
}

func TestRaw(t *testing.T) {
	t.Parallel()
	raw := []byte(personSchema)
	s, err := schema.Compile(raw)
	if err != nil {
		t.Fatalf("Compile(personSchema) = %v", err)
	}
	raw[0] = 'X' // the caller may reuse its slice
	if got := string(s.Raw()); got != personSchema {
		t.Errorf("Raw() = %q, want the document as given", got)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, benchSchema)
	tests := []struct {
		name string
		text string
		want string           // compact JSON on success
		errs []schema.Problem // problems on failure
	}{
		{name: "bare", text: `{"value":3,"first_word":"hello"}`, want: `{"value":3,"first_word":"hello"}`},
		{
			name: "fenced and indented",
			text: "Here you go:\n```json\n{\n  \"value\": 3,\n  \"first_word\": \"a b\"\n}\n```\n",
			want: `{"value":3,"first_word":"a b"}`,
		},
		{name: "in prose", text: `I counted {3} words: {"first_word": "I", "value": 3}.`, want: `{"first_word":"I","value":3}`},
		{name: "decimal integer", text: ` {"value": 3.0, "first_word": "x"} `, want: `{"value":3.0,"first_word":"x"}`},
		{
			name: "no JSON",
			text: "I'm sorry, I can't help with that.",
			errs: []schema.Problem{{Path: "$", Message: "no JSON object found in the answer"}},
		},
		{name: "empty", text: "", errs: []schema.Problem{{Path: "$", Message: "no JSON object found in the answer"}}},
		{
			name: "invalid value",
			text: "```json\n{\"value\": \"three\"}\n```",
			errs: []schema.Problem{
				{Path: "$", Message: `missing required property "first_word"`},
				{Path: "$.value", Message: "got string, want integer"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Parse(tt.text)
			if diff := cmp.Diff(tt.errs, problemsOf(t, err, tt.text)); diff != "" {
				t.Errorf("Parse(%q) problems mismatch (-want +got):\n%s", tt.text, diff)
			}
			if string(got) != tt.want {
				t.Errorf("Parse(%q) = %q, want %q", tt.text, got, tt.want)
			}
			if err == nil {
				var compact bytes.Buffer
				if err := json.Compact(&compact, got); err != nil || compact.String() != string(got) {
					t.Errorf("Parse(%q) = %q, not compact JSON (json.Compact gives %q, %v)", tt.text, got, compact.String(), err)
				}
			}
		})
	}
}

func TestValidationErrorError(t *testing.T) {
	t.Parallel()
	problems := []schema.Problem{
		{Path: "$.value", Message: "got string, want integer"},
		{Path: "$", Message: `missing required property "first_word"`},
	}
	err := &schema.ValidationError{Problems: problems, Raw: `{"value":"3"}`}
	want := `output does not match schema: $: missing required property "first_word"; $.value: got string, want integer`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if problems[0].Path != "$.value" {
		t.Errorf("Error() reordered the caller's Problems: %v", problems)
	}
	if got, want := (&schema.ValidationError{}).Error(), "output does not match schema"; got != want {
		t.Errorf("Error() without problems = %q, want %q", got, want)
	}
}

func TestFeedback(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, benchSchema)
	_, err := s.Parse(`{"value": "3", "extra": true}`)
	verr, ok := errors.AsType[*schema.ValidationError](err)
	if !ok {
		t.Fatalf("Parse = %v, want *ValidationError", err)
	}
	const want = `Your answer does not match the required JSON Schema. Problems:
- $: missing required property "first_word"
- $: property "extra" is not allowed
- $.value: got string, want integer
Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences.`
	if got := schema.Feedback(verr); got != want {
		t.Errorf("Feedback() = %q, want %q", got, want)
	}

	multiline := &schema.ValidationError{Problems: []schema.Problem{{Path: "$", Message: "first\nsecond"}}}
	const wantOneLine = "Your answer does not match the required JSON Schema. Problems:\n- $: first second\n" +
		"Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences."
	if got := schema.Feedback(multiline); got != wantOneLine {
		t.Errorf("Feedback(multi-line message) = %q, want %q", got, wantOneLine)
	}

	const wantNil = "Your answer does not match the required JSON Schema.\n" +
		"Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences."
	if got := schema.Feedback(nil); got != wantNil {
		t.Errorf("Feedback(nil) = %q, want %q", got, wantNil)
	}
}

func TestInstructions(t *testing.T) {
	t.Parallel()
	pretty := "{\n  \"type\": \"object\",\n  \"properties\": {\"first_word\": {\"type\": \"string\", \"description\": \"a b\"}}\n}"
	a := mustCompile(t, pretty)
	b := mustCompile(t, pretty)
	const want = "Answer with a single JSON value that conforms to this JSON Schema:\n" +
		`{"type":"object","properties":{"first_word":{"type":"string","description":"a b"}}}` + "\n" +
		"Reply with the JSON value only: no explanations before or after it, and no Markdown code fences."
	if got := a.Instructions(); got != want {
		t.Errorf("Instructions() = %q, want %q", got, want)
	}
	if a.Instructions() != b.Instructions() {
		t.Errorf("Instructions() differ between two compilations of one schema: %q and %q", a.Instructions(), b.Instructions())
	}
	if got := string(a.Raw()); got != pretty {
		t.Errorf("Raw() = %q after Instructions, want %q", got, pretty)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, personSchema)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if err := s.Validate(json.RawMessage(`{"name": "Ada", "age": 36}`)); err != nil {
					t.Errorf("goroutine %d: Validate(valid) = %v", i, err)
					return
				}
				if err := s.Validate(json.RawMessage(`{"age": "x"}`)); err == nil {
					t.Errorf("goroutine %d: Validate(invalid) = nil, want error", i)
					return
				}
				if _, err := s.Parse("```json\n{\"name\": \"Ada\", \"age\": 3.0}\n```"); err != nil {
					t.Errorf("goroutine %d: Parse(valid) = %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// fuzzSchemas are validated against every fuzz input, with references and
// combinators.
var fuzzSchemas = []string{
	benchSchema,
	personSchema,
	`{"type": "array", "items": {"enum": [1, "a", true, null]}, "maxItems": 3}`,
	`{"properties": {"n": {"type": "integer", "minimum": -5, "exclusiveMaximum": 10}}, "additionalProperties": {"type": "string", "minLength": 1, "maxLength": 2}}`,
	`{"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`,
	`{"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "object", "required": ["a"]}], "not": {"const": "ab"}}`,
	`{"oneOf": [{"type": "integer"}, {"multipleOf": 0.5}], "uniqueItems": true, "propertyNames": {"maxLength": 3}}`,
}

func FuzzSchemaValidate(f *testing.F) {
	for _, s := range modelAnswers {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"kids": [{"kids": [{}]}, {"kids": 1}]}`))
	f.Add([]byte(`{"n": 9, "x": "ab", "y": ""}`))
	f.Add([]byte(`[1, "a", true, null]`))
	f.Add([]byte(`{"value": 1e400, "first_word": "\ud800"}`))
	schemas := make([]*schema.Schema, len(fuzzSchemas))
	for i, raw := range fuzzSchemas {
		schemas[i] = mustCompile(f, raw)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for i, s := range schemas {
			err := s.Validate(doc)
			if err == nil {
				continue
			}
			verr, ok := errors.AsType[*schema.ValidationError](err)
			if !ok || len(verr.Problems) == 0 {
				t.Fatalf("schema %d: Validate(%q) = %v, want *ValidationError with problems", i, doc, err)
			}
			for _, p := range verr.Problems {
				if !strings.HasPrefix(p.Path, "$") || p.Message == "" {
					t.Fatalf("schema %d: Validate(%q) problem %+v, want a path from $ and a message", i, doc, p)
				}
			}
		}
	})
}
