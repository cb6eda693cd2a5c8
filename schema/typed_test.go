package schema_test

import (
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the golden file testdata/name, or rewrites the
// file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// report exercises every kind of field For handles.
type report struct {
	Title    string         `json:"title" jsonschema:"a short title"`
	Author   author         `json:"author"`
	Reviewer *author        `json:"reviewer,omitempty" jsonschema:"who checked it, if anyone"`
	Tags     []string       `json:"tags"`
	Counts   map[string]int `json:"counts" jsonschema:"occurrences by word"`
	Due      time.Time      `json:"due"`
	Score    float64        `json:"score,omitzero"`
	Notes    string         `json:"notes,omitempty" jsonschema:"free text; may use <b> & <i>"`
	Draft    bool
	//lint:ignore U1000 present to show that unexported fields are left out
	internal int
	Skipped  bool `json:"-"`
}

type author struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	Age   uint8  `json:"age"`
}

func TestFor(t *testing.T) {
	t.Parallel()
	raw, err := schema.For[report]()
	if err != nil {
		t.Fatalf("For[report]() = %v", err)
	}
	golden(t, "for_report.golden.json", append(raw, '\n'))

	again, err := schema.For[report]()
	if err != nil || string(again) != string(raw) {
		t.Errorf("For[report]() again = %s, %v, want the same bytes %s", again, err, raw)
	}
}

// TestForValidates checks the contract of For: what encoding/json writes for
// a T validates, and the schema rejects what would not fit a T.
func TestForValidates(t *testing.T) {
	t.Parallel()
	raw, err := schema.For[report]()
	if err != nil {
		t.Fatalf("For[report]() = %v", err)
	}
	s, err := schema.Compile(raw)
	if err != nil {
		t.Fatalf("Compile(For[report]()) = %v", err)
	}
	full := report{
		Title:    "Q3",
		Author:   author{Name: "Ada", Age: 36},
		Reviewer: &author{Name: "Grace", Email: "grace@example.com"},
		Tags:     []string{"a"},
		Counts:   map[string]int{"x": 1},
		Due:      time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Score:    0.5,
		Notes:    "ok",
	}
	// A nil map marshals as null, which the schema of a map does not allow.
	for _, v := range []report{{Counts: map[string]int{}}, full} {
		doc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(doc); err != nil {
			t.Errorf("Validate(json.Marshal(%+v)) = %v, want nil", v, err)
		}
	}

	tests := []struct {
		name string
		doc  string
		want []schema.Problem
	}{
		{
			name: "extra property",
			doc:  `{"title":"","author":{"name":"","age":0,"nick":"x"},"tags":null,"counts":{},"due":"2025-03-01T12:00:00Z","Draft":false,"extra":1}`,
			want: []schema.Problem{
				{Path: "$", Message: `property "extra" is not allowed`},
				{Path: "$.author", Message: `property "nick" is not allowed`},
			},
		},
		{
			name: "missing required",
			doc:  `{"title":"x"}`,
			want: []schema.Problem{
				{Path: "$", Message: `missing required property "Draft"`},
				{Path: "$", Message: `missing required property "author"`},
				{Path: "$", Message: `missing required property "counts"`},
				{Path: "$", Message: `missing required property "due"`},
				{Path: "$", Message: `missing required property "tags"`},
			},
		},
		{
			name: "wrong types",
			doc:  `{"title":1,"author":{"name":"a","age":256},"tags":"a","counts":{"x":"1"},"due":"tomorrow","Draft":false}`,
			want: []schema.Problem{
				{Path: "$.author.age", Message: "must be <= 255, got 256"},
				{Path: "$.counts.x", Message: "got string, want integer"},
				{Path: "$.due", Message: `"tomorrow" is not a valid date-time: less than 20 characters long`},
				{Path: "$.tags", Message: "got string, want null or array"},
				{Path: "$.title", Message: "got number, want string"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(json.RawMessage(tt.doc))
			if diff := cmp.Diff(tt.want, problemsOf(t, err, tt.doc)); diff != "" {
				t.Errorf("Validate(%s) problems mismatch (-want +got):\n%s", tt.doc, diff)
			}
		})
	}
}

type textID string

func (id textID) MarshalText() ([]byte, error) { return []byte(id), nil }

type ownJSON struct{ X int }

func (ownJSON) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type recursive struct {
	Kids []recursive `json:"kids"`
}

type Named struct {
	A int `json:"a"`
}

type embedsNamed struct {
	Named `json:"named"`
}

type embeds struct {
	Named
	B int `json:"b"`
}

func TestForTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  func() (json.RawMessage, error)
		want string
	}{
		{name: "string", got: schema.For[string], want: `{"type":"string"}`},
		{name: "int8", got: schema.For[int8], want: `{"type":"integer","minimum":-128,"maximum":127}`},
		{name: "uint", got: schema.For[uint], want: `{"type":"integer","minimum":0}`},
		{name: "float32", got: schema.For[float32], want: `{"type":"number"}`},
		{name: "pointer", got: schema.For[*bool], want: `{"type":["null","boolean"]}`},
		{name: "slice", got: schema.For[[]int], want: `{"type":["null","array"],"items":{"type":"integer"}}`},
		{name: "array", got: schema.For[[2]string], want: `{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2}`},
		{name: "byte slice", got: schema.For[[]byte], want: `{"type":["null","string"]}`},
		{name: "map", got: schema.For[map[string][]int], want: `{"type":"object","additionalProperties":{"type":["null","array"],"items":{"type":"integer"}}}`},
		{name: "any", got: schema.For[any], want: `true`},
		{name: "raw message", got: schema.For[json.RawMessage], want: `{"type":["null","boolean","number","string","array","object"]}`},
		{name: "raw message pointer", got: schema.For[*json.RawMessage], want: `{"type":["null","boolean","number","string","array","object"]}`},
		{name: "json number", got: schema.For[json.Number], want: `{"type":"number"}`},
		{name: "time", got: schema.For[time.Time], want: `{"type":"string","format":"date-time"}`},
		{name: "time pointer", got: schema.For[*time.Time], want: `{"type":["null","string"],"format":"date-time"}`},
		{name: "duration", got: schema.For[time.Duration], want: `{"type":"integer"}`},
		{name: "big int pointer", got: schema.For[*big.Int], want: `{"type":["null","integer"]}`},
		{name: "slog level", got: schema.For[slog.Level], want: `{"type":"string"}`},
		{name: "text marshaler", got: schema.For[netip.Addr], want: `{"type":"string"}`},
		{name: "own text marshaler", got: schema.For[map[string]textID], want: `{"type":"object","additionalProperties":{"type":"string"}}`},
		{name: "empty struct", got: schema.For[struct{}], want: `{"type":"object","additionalProperties":false}`},
		{
			name: "embedded struct",
			got:  schema.For[embeds],
			want: `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.got()
			if err != nil || string(got) != tt.want {
				t.Fatalf("For = %s, %v, want %s", got, err, tt.want)
			}
			if _, err := schema.Compile(got); err != nil {
				t.Errorf("Compile(%s) = %v", got, err)
			}
		})
	}
}

func TestForUnsupported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  func() (json.RawMessage, error)
		want string
	}{
		{
			name: "channel",
			got:  schema.For[struct{ C chan int }],
			want: "schema: unsupported Go type struct { C chan int }: type chan int is unsupported by jsonschema",
		},
		{name: "func", got: schema.For[func()], want: "schema: unsupported Go type func(): type func() is unsupported by jsonschema"},
		{name: "complex", got: schema.For[[]complex128], want: "schema: unsupported Go type []complex128: computing element schema: type complex128 is unsupported by jsonschema"},
		{name: "int map key", got: schema.For[map[int]string], want: "schema: unsupported Go type map[int]string: unsupported map key type int"},
		{
			name: "recursive",
			got:  schema.For[recursive],
			want: "schema: unsupported Go type schema_test.recursive: computing element schema: cycle detected for type schema_test.recursive",
		},
		{
			name: "own MarshalJSON",
			got:  schema.For[map[string]*ownJSON],
			want: "schema: unsupported Go type map[string]*schema_test.ownJSON: schema_test.ownJSON has its own MarshalJSON method, so its JSON form is unknown",
		},
		{
			name: "string option",
			got: schema.For[struct {
				N int `json:"n,string"`
			}],
			want: "schema: unsupported Go type struct { N int \"json:\\\"n,string\\\"\" }: field N of struct { N int \"json:\\\"n,string\\\"\" }: the json \",string\" option is not supported",
		},
		{
			name: "embedded with a name",
			got:  schema.For[embedsNamed],
			want: "schema: unsupported Go type schema_test.embedsNamed: field Named of schema_test.embedsNamed: only embedded structs without a json name are supported",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.got()
			if !errors.Is(err, schema.ErrUnsupportedType) || got != nil {
				t.Fatalf("For = %s, %v, want nil, ErrUnsupportedType", got, err)
			}
			if err.Error() != tt.want {
				t.Errorf("For error = %q, want %q", err, tt.want)
			}
		})
	}
}
