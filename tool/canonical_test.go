package tool_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/tool"
)

var canonicalTests = []struct {
	name string
	in   string
	want string // empty: an error is wanted
}{
	{name: "compact sorted", in: `{"a":1,"b":2}`, want: `{"a":1,"b":2}`},
	{name: "unsorted with whitespace", in: "{ \"b\" : 2,\n\t\"a\":1 }\r\n", want: `{"a":1,"b":2}`},
	{name: "nested unsorted", in: `{"z":{"y":1,"x":[{"b":1,"a":2}, []]},"a":null}`, want: `{"a":null,"z":{"x":[{"a":2,"b":1},[]],"y":1}}`},
	{name: "numbers verbatim", in: `{"n":1.50,"e":1E+2,"neg":-0,"big":123456789012345678901234567890}`, want: `{"big":123456789012345678901234567890,"e":1E+2,"n":1.50,"neg":-0}`},
	{name: "literals", in: `{"t":true,"f":false,"n":null}`, want: `{"f":false,"n":null,"t":true}`},
	{name: "canonical escapes kept", in: `{"s":"a\"b\\c\nd\te\rf\bg\fh"}`, want: `{"s":"a\"b\\c\nd\te\rf\bg\fh"}`},
	{name: "escaped slash", in: `{"p":"a\/b"}`, want: `{"p":"a/b"}`},
	{name: "unicode escape", in: `{"s":"\u0041\u00e9"}`, want: `{"s":"Aé"}`},
	{name: "control escape", in: `{"s":"\u0001"}`, want: `{"s":"\u0001"}`},
	{name: "html not escaped", in: `{"h":"<a href=\"x\">&amp;</a>"}`, want: `{"h":"<a href=\"x\">&amp;</a>"}`},
	{name: "line separator escaped", in: "{\"s\":\"a\u2028b\"}", want: `{"s":"a\u2028b"}`},
	{name: "invalid UTF-8 replaced", in: "{\"s\":\"a\xffb\"}", want: "{\"s\":\"a\uFFFDb\"}"},
	{name: "duplicate keys keep the last", in: `{"a":1,"b":0,"a":2}`, want: `{"a":2,"b":0}`},
	{name: "non-ASCII keys sort bytewise", in: `{"é":1,"z":2,"Z":3}`, want: `{"Z":3,"z":2,"é":1}`},
	{name: "escaped key", in: `{"b":1,"\u0061":2}`, want: `{"a":2,"b":1}`},
	{name: "empty object", in: `{}`, want: `{}`},
	{name: "empty input", in: ``, want: `{}`},
	{name: "blank input", in: " \n\t", want: `{}`},
	{name: "array", in: `[1]`},
	{name: "null", in: `null`},
	{name: "string", in: `"x"`},
	{name: "number", in: `1`},
	{name: "truncated", in: `{"a":`},
	{name: "missing value", in: `{"a":}`},
	{name: "trailing comma", in: `{"a":1,}`},
	{name: "leading zero", in: `{"a":01}`},
	{name: "trailing value", in: `{"a":1} {}`},
	{name: "trailing garbage", in: `{"a":1}x`},
	{name: "raw control character", in: "{\"a\":\"\x01\"}"},
	{name: "single quotes", in: `{'a':1}`},
}

func TestCanonicalArgs(t *testing.T) {
	t.Parallel()
	for _, tt := range canonicalTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tool.CanonicalArgs(nil, []byte(tt.in))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("CanonicalArgs(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("CanonicalArgs(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCanonicalArgsAppends(t *testing.T) {
	t.Parallel()
	got, err := tool.CanonicalArgs([]byte("prefix\x00"), []byte(`{ "b":2, "a":1 }`))
	if want := "prefix\x00{\"a\":1,\"b\":2}"; err != nil || string(got) != want {
		t.Fatalf("CanonicalArgs(prefix, args) = %q, %v, want %q", got, err, want)
	}
}

// FuzzCanonicalArgs checks the fast canonicaliser against the reference
// definition, and that the canonical form is a fixed point.
func FuzzCanonicalArgs(f *testing.F) {
	for _, tt := range canonicalTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"path":"src/main.go","offset":10,"limit":200}`))
	f.Add([]byte(`{"q":{"and":[{"k":"v"},{"k":"w","a":[1,2,{"z":0,"y":[]}]}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ref, refErr := tool.ReferenceCanonical(in)
		if fast, ok := tool.AppendCanonical(nil, in); ok {
			if refErr != nil {
				t.Fatalf("AppendCanonical(%q) = %q, but ReferenceCanonical fails: %v", in, fast, refErr)
			}
			if !bytes.Equal(fast, ref) {
				t.Fatalf("AppendCanonical(%q) = %q, want %q", in, fast, ref)
			}
		}
		got, err := tool.CanonicalArgs(nil, in)
		if len(bytes.TrimSpace(in)) == 0 {
			return
		}
		if (err == nil) != (refErr == nil) || !bytes.Equal(got, ref) {
			t.Fatalf("CanonicalArgs(%q) = %q, %v, want %q, %v", in, got, err, ref, refErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) || got[0] != '{' {
			t.Fatalf("CanonicalArgs(%q) = %q, not a JSON object", in, got)
		}
		again, err := tool.CanonicalArgs(nil, got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("CanonicalArgs(%q) = %q, %v, want it unchanged", got, again, err)
		}
	})
}
