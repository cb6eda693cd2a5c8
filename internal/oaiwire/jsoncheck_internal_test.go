package oaiwire

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestCheckJSON(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" when accepted
	}{
		{"object", `{"a":[1,{"b":"c"}],"d":null}`, ""},
		{"white space around", " \n{\"a\":1}\t ", ""},
		{"escaped pair", `{"a":"\ud83d\ude00"}`, ""},
		{"duplicate at the top", `{"model":"a","model":"b"}`, `duplicate key "model" at $.model (byte offset 13)`},
		{"duplicate nested", `{"a":[{"b":1,"b":2}]}`, `duplicate key "b" at $.a[0].b (byte offset 13)`},
		{"duplicate odd key", `{"x y":{"k":1,"k":1}}`, `duplicate key "k" at $["x y"].k (byte offset 14)`},
		{"bad byte", "{\"a\":\"x\xff\"}", `invalid UTF-8 (byte 0xff) at $.a (byte offset 7)`},
		{"lone surrogate", `{"a":["\udc00"]}`, `invalid UTF-8 (a lone surrogate escape) at $.a[0] (byte offset 7)`},
		{"data after", `{"a":1} {}`, `not valid JSON: invalid character '{' after top-level value at byte offset 9`},
		{"cut short", `{"a":1`, `not valid JSON: unexpected end of JSON input at byte offset 6`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if e := CheckJSON([]byte(tt.in)); e != nil {
				got = e.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CheckJSON(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// FuzzCheckJSON: CheckJSON never panics; what it accepts encoding/json
// accepts too and is valid UTF-8; what encoding/json refuses it refuses;
// and a fault it reports lies within the text.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"sim","model":"up"}`,
		`{"a":{"b":[{"c":1,"c":2}]}}`,
		"{\"a\":\"\xc3\"}",
		`{"a":"\ud800"}`,
		`{"a":"\ud83d\ude00","b":[true,false,null,1e999]}`,
		`[1,2,3]`, `"x"`, `{"a":1} {"b":2}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := CheckJSON(data)
		valid := json.Unmarshal(data, new(json.RawMessage)) == nil
		if e == nil {
			if !valid || !utf8.Valid(data) {
				t.Fatalf("CheckJSON(%q) accepted a text encoding/json refuses or that is not UTF-8", data)
			}
			return
		}
		if e.offset < 0 || e.offset > int64(len(data)) {
			t.Fatalf("CheckJSON(%q) = %v: offset outside the text", data, e)
		}
		if e.path != "" && !strings.HasPrefix(e.path, "$") {
			t.Fatalf("CheckJSON(%q) = %v: path %q", data, e, e.path)
		}
	})
}
