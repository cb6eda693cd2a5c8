package schema

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// These tests are internal: the fast path is invisible through the API by
// design (it only changes how fast a valid answer is accepted), so they
// call it directly and compare it with the library path it stands in for.

func TestCompileSimple(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		simple bool
	}{
		{"bench object", `{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`, true},
		{"true", `true`, true},
		{"false", `false`, true},
		{"empty", `{}`, true},
		{"type list", `{"type":["string","null"]}`, true},
		{"scalar enum", `{"enum":[1,"a",null,true,2.5e3]}`, true},
		{"scalar const", `{"const":"x"}`, true},
		{"string bounds and pattern", `{"type":"string","minLength":1,"maxLength":2.0,"pattern":"^a+$"}`, true},
		{"number bounds", `{"minimum":-1.5,"maximum":1e3,"exclusiveMinimum":-2,"exclusiveMaximum":18446744073709551616}`, true},
		{"array", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, true},
		{"items false", `{"items":false}`, true},
		{"additional schema", `{"additionalProperties":{"type":"string"},"minProperties":1,"maxProperties":2}`, true},
		{"required only", `{"required":["a","b"]}`, true},
		{"annotations", `{"title":"t","description":"d","default":{"a":[1]},"examples":[{}],"$comment":"c","deprecated":true,"readOnly":false,"writeOnly":false}`, true},
		{"draft 2020-12", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, true},
		{"draft 7 with fragment", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, true},
		{"draft 2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema"}`, true},
		{"draft 6", `{"$schema":"http://json-schema.org/draft-06/schema#"}`, true},
		{"nested", `{"properties":{"a":{"properties":{"b":{"items":{"enum":["x"]}}}}}}`, true},

		{"draft 4", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, false},
		{"latest draft", `{"$schema":"https://json-schema.org/schema"}`, false},
		{"nested $schema", `{"properties":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`, false},
		{"ref", `{"$defs":{"a":{"type":"string"}},"$ref":"#/$defs/a"}`, false},
		{"defs unused", `{"$defs":{"a":{"type":"string"}},"type":"string"}`, false},
		{"id", `{"$id":"https://example.com/s","type":"string"}`, false},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"null"}]}`, false},
		{"nested oneOf", `{"properties":{"a":{"oneOf":[true]}}}`, false},
		{"allOf", `{"allOf":[true]}`, false},
		{"not", `{"not":false}`, false},
		{"format", `{"type":"string","format":"date-time"}`, false},
		{"if", `{"if":true,"then":true}`, false},
		{"dependentRequired", `{"dependentRequired":{"a":["b"]}}`, false},
		{"patternProperties", `{"patternProperties":{"^a":true}}`, false},
		{"unevaluatedProperties", `{"unevaluatedProperties":false}`, false},
		{"uniqueItems", `{"uniqueItems":true}`, false},
		{"multipleOf", `{"multipleOf":2}`, false},
		{"prefixItems", `{"prefixItems":[true]}`, false},
		{"propertyNames", `{"propertyNames":{"maxLength":3}}`, false},
		{"unknown keyword", `{"x-order":1}`, false},
		{"object enum", `{"enum":[{"a":1}]}`, false},
		{"array const", `{"const":[1]}`, false},
		{"huge exponent bound", `{"minimum":1e100000}`, false},
		{"huge exponent enum", `{"enum":[1e-100000]}`, false},
		{"huge length", `{"maxLength":1e10}`, false},
		{"nested not simple", `{"items":{"properties":{"a":{"format":"email"}}}}`, false},
		{"additional not simple", `{"additionalProperties":{"anyOf":[true]}}`, false},
		{"64 names", requires(64, false), true},
		{"64 names in properties and required", requires(64, true), true},
		{"too many names", requires(65, false), false},
		{"too many properties", requires(65, true), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatalf("Compile(%s) = %v", tt.schema, err)
			}
			if got := s.fast != nil; got != tt.simple {
				t.Errorf("Compile(%s): simple = %t, want %t", tt.schema, got, tt.simple)
			}
		})
	}
}

// mustCompileInternal compiles raw or fails the test.
func mustCompileInternal(tb testing.TB, raw string) *Schema {
	tb.Helper()
	s, err := Compile(json.RawMessage(raw))
	if err != nil {
		tb.Fatalf("Compile(%s) = %v", raw, err)
	}
	return s
}

func TestSimpleCheck(t *testing.T) {
	t.Parallel()
	const (
		integer = `{"type":"integer"}`
		object  = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":2}},"required":["a"],"additionalProperties":false}`
		bounds  = `{"minimum":18446744073709551615,"exclusiveMaximum":1e20}`
		enum    = `{"enum":[1,"a",null,true,"é"]}`
	)
	tests := []struct {
		name   string
		schema string
		doc    string
		want   verdict
	}{
		{"integer", integer, `3`, valid},
		{"integer 1.0", integer, `1.0`, valid},
		{"integer 1e2", integer, `1e2`, valid},
		{"integer 1.5e1", integer, `1.5e1`, valid},
		{"integer 100e-2", integer, `100e-2`, valid},
		{"integer -0.0e5", integer, `-0.0e5`, valid},
		{"integer beyond int64", integer, `123456789012345678901234567890`, valid},
		{"integer 1E+0003", integer, `1E+0003`, valid},
		{"integer 1.05e1", integer, `1.05e1`, invalid},
		{"integer 1e-5", integer, `1e-5`, invalid},
		{"integer 0.5", integer, `0.5`, invalid},
		{"integer string", integer, `"3"`, invalid},
		{"integer huge exponent", integer, `1e10000`, undecided},
		{"integer padded", integer, " \n 7 \t", valid},
		{"integer trailing text", integer, `7 8`, undecided},
		{"integer not JSON", integer, `{`, invalid},
		{"true not JSON", `true`, `[1,`, undecided},
		{"integer empty", integer, ``, undecided},
		{"number any", `{"type":"number"}`, `1e10000`, valid},

		{"object", object, `{"a":1,"b":"xy"}`, valid},
		{"object required only", object, `{"a":1}`, valid},
		{"object missing", object, `{"b":"x"}`, invalid},
		{"object extra", object, `{"a":1,"c":null}`, invalid},
		{"object escaped name", object, `{"\u0061":1}`, valid},
		{"object escaped extra", object, `{"a":1,"\u0063":1}`, invalid},
		{"object long string", object, `{"a":1,"b":"xyz"}`, invalid},
		{"object runes", object, `{"a":1,"b":"éé"}`, valid},
		{"object escaped runes", object, `{"a":1,"b":"\u00e9\ud83d\ude00"}`, valid},
		{"object duplicate", object, `{"a":1,"a":2}`, undecided},
		{"object escaped duplicate", object, `{"a":1,"\u0061":2}`, undecided},
		{"object invalid UTF-8", object, "{\"a\":1,\"b\":\"\xff\"}", undecided},
		{"object lone surrogate", object, `{"a":1,"b":"\ud800"}`, undecided},
		{"object wrong type", object, `[]`, invalid},

		{"bounds at minimum", bounds, `18446744073709551615`, valid},
		{"bounds above", bounds, `1.8446744073709551615000001e19`, valid},
		{"bounds below", bounds, `18446744073709551614.999`, invalid},
		{"bounds at exclusive maximum", bounds, `100000000000000000000.0`, invalid},
		{"bounds below exclusive maximum", bounds, `99999999999999999999.9`, valid},
		{"negative bounds", `{"minimum":-2.5,"maximum":-0.001}`, `-1`, valid},
		{"negative below", `{"minimum":-2.5,"maximum":-0.001}`, `-2.50001`, invalid},
		{"negative zero above", `{"minimum":-2.5,"maximum":-0.001}`, `-0`, invalid},
		{"zero bound", `{"exclusiveMinimum":0}`, `0.0`, invalid},
		{"zero bound positive", `{"exclusiveMinimum":0}`, `1e-300`, valid},

		{"enum number", enum, `1.0`, valid},
		{"enum number exponent", enum, `0.1e1`, valid},
		{"enum escaped string", enum, `"\u0061"`, valid},
		{"enum unicode", enum, `"\u00e9"`, valid},
		{"enum null", enum, `null`, valid},
		{"enum true", enum, `true`, valid},
		{"enum false", enum, `false`, invalid},
		{"enum other string", enum, `"b"`, invalid},
		{"enum other number", enum, `2`, invalid},
		{"enum object", enum, `{}`, invalid},
		{"const", `{"const":false}`, `false`, valid},
		{"const other", `{"const":false}`, `0`, invalid},
		{"empty enum", `{"enum":[]}`, `null`, invalid},

		{"array", `{"items":{"type":"string"},"minItems":1,"maxItems":2}`, `["a", "b"]`, valid},
		{"array short", `{"items":{"type":"string"},"minItems":1,"maxItems":2}`, `[]`, invalid},
		{"array long", `{"items":{"type":"string"},"minItems":1,"maxItems":2}`, `["a","b","c"]`, invalid},
		{"array item", `{"items":{"type":"string"},"minItems":1,"maxItems":2}`, `[1]`, invalid},
		{"items false", `{"items":false}`, `[]`, valid},
		{"items false one", `{"items":false}`, `[null]`, invalid},
		{"pattern", `{"pattern":"^a.c$"}`, `"a\u00e9c"`, valid},
		{"pattern mismatch", `{"pattern":"^a.c$"}`, `"abbc"`, invalid},
		{"false", `false`, `{}`, invalid},
		{"true deep", `true`, `{"a":[{"b":[[],{}]}],"a2":"\u0000"}`, valid},
		{"true duplicate", `true`, `{"a":1,"a":1}`, undecided},
		{"properties count", `{"minProperties":1,"maxProperties":1}`, `{"x":{}}`, valid},
		{"too few properties", `{"minProperties":1,"maxProperties":1}`, `{}`, invalid},
		{"too many properties", `{"minProperties":1,"maxProperties":1}`, `{"x":1,"y":2}`, invalid},
		{"additional schema", `{"properties":{"a":true},"additionalProperties":{"type":"integer"}}`, `{"a":"s","b":2}`, valid},
		{"additional schema fails", `{"properties":{"a":true},"additionalProperties":{"type":"integer"}}`, `{"a":"s","b":2.5}`, invalid},
		{"required not a property", `{"required":["a"],"additionalProperties":{"type":"string"}}`, `{"a":"x"}`, valid},
		{"required not a property checked", `{"required":["a"],"additionalProperties":{"type":"string"}}`, `{"a":1}`, invalid},
		{"false property", `{"properties":{"a":false}}`, `{"b":1}`, valid},
		{"false property present", `{"properties":{"a":false}}`, `{"a":1}`, invalid},
		{"many properties", manyProps, `{"p0":0,"p9":9,"p10":"x","q":1}`, valid},
		{"many properties missing", manyProps, `{"p0":0,"p10":"x"}`, invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompileInternal(t, tt.schema)
			if s.fast == nil {
				t.Fatalf("Compile(%s) is not simple", tt.schema)
			}
			if _, got := s.fast.check([]byte(tt.doc), true); got != tt.want {
				t.Errorf("check(%s, %q) = %v, want %v", tt.schema, tt.doc, got, tt.want)
			}
			checkFast(t, s, []byte(tt.doc))
		})
	}
}

// requires returns a schema that requires n names, which are also its
// properties when props is set.
func requires(n int, props bool) string {
	quoted := make([]string, n)
	for i := range quoted {
		quoted[i] = strconv.Quote("n" + strconv.Itoa(i))
	}
	schema := `{"required":[` + strings.Join(quoted, ",") + `]`
	if props {
		schema += `,"properties":{` + strings.Join(quoted, ":{},") + `:{}}`
	}
	return schema + "}"
}

// manyProps has enough properties for the map lookup.
const manyProps = `{"properties":{"p0":{},"p1":{},"p2":{},"p3":{},"p4":{},"p5":{},"p6":{},"p7":{},"p8":{},"p9":{"type":"integer"},"p10":{"type":"string"}},"required":["p0","p9","p10"]}`

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lit     string
		ok      bool
		integer bool
		digits  string
		point   int
	}{
		{"0", true, true, "", 0},
		{"-0.000e-7", true, true, "", 0},
		{"1", true, true, "1", 1},
		{"120", true, true, "12", 3},
		{"0.0012", true, false, "12", -2},
		{"12.50", true, false, "125", 2},
		{"1.5e1", true, true, "15", 2},
		{"1E-0002", true, false, "1", -1},
		{"-3e+4", true, true, "3", 5},
		{"1e9999", true, true, "1", 10000},
		{"1e10000", false, false, "", 0},
		{"1e0000000010", true, true, "1", 11},
		{"0." + strings.Repeat("0", 100001), false, false, "", 0},
	}
	for _, tt := range tests {
		d, ok := parseDecimal([]byte(tt.lit))
		if ok != tt.ok {
			t.Errorf("parseDecimal(%.20s) ok = %t, want %t", tt.lit, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		if got := string(d.hi) + string(d.lo); got != tt.digits || d.point != tt.point || d.isInteger() != tt.integer {
			t.Errorf("parseDecimal(%s) = digits %q point %d integer %t, want %q %d %t", tt.lit, got, d.point, d.isInteger(), tt.digits, tt.point, tt.integer)
		}
	}
}

func TestDecimalCompare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"0", "-0.0", 0},
		{"1", "1.000", 0},
		{"10", "1e1", 0},
		{"0.1", "1e-1", 0},
		{"1", "2", -1},
		{"-1", "-2", 1},
		{"-1", "0", -1},
		{"0", "1e-300", -1},
		{"12", "121e-1", -1},
		{"12.1", "12", 1},
		{"99", "100", -1},
		{"-99", "-100", 1},
		{"18446744073709551615", "18446744073709551616", -1},
	}
	for _, tt := range tests {
		a, aok := parseDecimal([]byte(tt.a))
		b, bok := parseDecimal([]byte(tt.b))
		if !aok || !bok {
			t.Fatalf("parseDecimal(%s, %s) refused", tt.a, tt.b)
		}
		if got := a.compare(&b); got != tt.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := b.compare(&a); got != -tt.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

// checkFast compares the fast path on doc with the library: a valid verdict
// only for documents the library accepts, with the compact text of
// json.Compact; an invalid verdict only for documents it rejects; and no
// verdict for a document the library accepts unless the document holds
// what the fast path leaves to the library.
func checkFast(t *testing.T, s *Schema, doc []byte) {
	t.Helper()
	libValid := json.Valid(doc) && s.validateLibrary(doc, string(doc)) == nil
	out, v := s.fast.check(doc, true)
	switch {
	case v == valid && !libValid:
		t.Fatalf("fast check(%s, %q) = valid, the library rejects it: %v", s.raw, doc, s.validateLibrary(doc, string(doc)))
	case v == valid && !bytes.Equal(out, compact(doc)):
		t.Fatalf("fast check(%s, %q) = %q, json.Compact gives %q", s.raw, doc, out, compact(doc))
	case v == invalid && libValid:
		t.Fatalf("fast check(%s, %q) = invalid, the library accepts it", s.raw, doc)
	case v == undecided && libValid && !leftToLibrary(doc):
		t.Fatalf("fast check(%s, %q) = undecided, the library accepts it and it holds nothing the fast path leaves to it", s.raw, doc)
	}
	// Through the API: the same answer as the library, fast or not.
	if err := s.Validate(doc); (err == nil) != libValid {
		t.Fatalf("Validate(%q) = %v, the library says valid = %t", doc, err, libValid)
	}
	if !json.Valid(doc) {
		return
	}
	got, _, err := s.parsed(doc, string(doc))
	if (err == nil) != libValid || libValid && !bytes.Equal(got, compact(doc)) {
		t.Fatalf("parsed(%q) = %q, %v; the library says valid = %t", doc, got, err, libValid)
	}
	if err := s.validateJSON(doc, string(doc)); (err == nil) != libValid {
		t.Fatalf("validateJSON(%q) = %v, the library says valid = %t", doc, err, libValid)
	}
}

// bigExponent matches a JSON number with an exponent of 5 digits or more.
var bigExponent = regexp.MustCompile(`[eE][+-]?0*[1-9][0-9]{4}`)

// bigNumber reports whether num, a JSON number, has an exponent of 5 digits
// or more, or a fraction of more than 100,000 digits.
func bigNumber(num string) bool {
	_, frac, _ := strings.Cut(num, ".")
	frac, _, _ = strings.Cut(strings.ToLower(frac), "e")
	return bigExponent.MatchString(num) || len(frac) > 100000
}

// leftToLibrary reports whether doc, which the library accepts, holds what
// the fast path does not decide: duplicate names (which decoding resolves,
// the last one winning), text that is not UTF-8 or an escape of a lone
// surrogate (which decoding replaces), or a number beyond the bounds where
// the library parses numbers exactly.
func leftToLibrary(doc []byte) bool {
	if !jsontext.Value(doc).IsValid() {
		return true
	}
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if tok.Kind() == '0' && bigNumber(tok.String()) {
			return true
		}
	}
}

// fastSchemas are simple schemas for the fuzz target, one per feature.
var fastSchemas = []string{
	`{"type":"object","properties":{"value":{"type":"integer"},"first_word":{"type":"string"}},"required":["value","first_word"],"additionalProperties":false}`,
	`{"type":"object","properties":{"title":{"type":"string","minLength":1},"author":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":255}},"required":["name","age"],"additionalProperties":false},"tags":{"type":["null","array"],"items":{"type":"string"}},"scores":{"type":"array","items":{"type":"number"},"maxItems":10},"status":{"enum":["draft","final"]}},"required":["title","author","tags","status"],"additionalProperties":false}`,
	`{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}`,
	`{"type":["integer","string"],"exclusiveMinimum":0.5,"exclusiveMaximum":1e1,"maxLength":3}`,
	`{"minimum":0.5,"maximum":10}`,
	`{"exclusiveMinimum":0.5,"exclusiveMaximum":10}`,
	`{"enum":[1,"a",null,true,1e3,"\u00e9"]}`,
	`{"const":2.50}`,
	`{"type":"string","pattern":"^[a-z]+\\d?$","minLength":2}`,
	`{"items":{"type":"array","items":{"type":"object"}},"minItems":1,"maxItems":4}`,
	`{"additionalProperties":{"type":"boolean"},"properties":{"n":{"type":"null"}},"required":["n","k"],"minProperties":2,"maxProperties":3}`,
	`{"properties":{"a":false,"b":true},"additionalProperties":true}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"type":"number","maximum":1e-3}}}`,
	manyProps,
	`true`,
	`{}`,
}

// fastDocs are documents for the fuzz target: tricky numbers, escapes,
// duplicate names, deep nesting, empty objects.
var fastDocs = []string{
	`{"value":3,"first_word":"hello"}`,
	`{"value": 3.0, "first_word": "hello", "extra": 1}`,
	`{"value":1e2,"first_word":"\u0068\u00e9\ud83d\ude00"}`,
	`{"value":1,"value":2,"first_word":"x"}`,
	`{"value":1,"\u0076alue":2,"first_word":"x"}`,
	`{"title":"A report","author":{"name":"Ann","age":42},"tags":["x","y"],"scores":[1.5,2,3e1],"status":"final"}`,
	`{"title":"","author":{"name":"Ann","age":256},"tags":null,"status":"draft"}`,
	`{"title":"t","author":{"name":"Ann","age":42.0},"tags":[],"scores":[],"status":"final","x":{}}`,
	`9223372036854775807`,
	`9223372036854775808`,
	`-9223372036854775808.0`,
	`0.5`, `0.50000000000000000001`, `0.49999`, `10`, `10.0`, `9.999`, `10.001`, `1E400`, `1e-400`, `-0`, `1e10000`, `0e99999`,
	`"ab"`, `"abc"`, `"ab1"`, `"abcd"`, `"\u00e9\u00e9"`, `"\ud800"`, "\"\xff\"",
	`[[{}],[{},{}]]`, `[[1]]`, `[[]]`, `[[],[],[],[]]`, `[[],[],[],[],[]]`, `[[[[[[[[[[]]]]]]]]]]`, `[{"a":[{"a":[{"a":[]}]}]}]`,
	`{}`, `[]`, `null`, `true`, `false`, `1`, `1.0`, `1000.0e-0`, `2.5`, `25e-1`,
	`{"n":null,"k":true}`, `{"n":null,"k":true,"z":false}`, `{"n":null,"k":true,"z":false,"y":true}`, `{"n":null}`, `{"n":null,"k":1}`, `{"a":1}`, `{"b":{"c":[1,{"d":null}]}}`,
	`{"x":0.0009999}`, `{"x":0.001}`, `{"x":0.0010001}`,
	`{"p0":0,"p9":9,"p10":"x"}`,
	" {\n \"value\" : 3 ,\n \"first_word\" : \"a b\" \n} \n",
	`{"value":3,"first_word":"hello"} trailing`,
	`{"value":3,`,
	``,
}

// FuzzFastValidate checks the fast path against the library on pairs of a
// schema and a document (see checkFast): it may only say valid where the
// library does, with json.Compact's text, and must say valid wherever the
// library does, but for what it leaves to the library.
func FuzzFastValidate(f *testing.F) {
	for _, s := range fastSchemas {
		for _, d := range fastDocs {
			f.Add(s, []byte(d))
		}
	}
	f.Fuzz(func(t *testing.T, raw string, doc []byte) {
		s, err := Compile(json.RawMessage(raw))
		if err != nil || s.fast == nil {
			return
		}
		checkFast(t, s, doc)
	})
}
