package pack_test

import (
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/pack"
	"github.com/google/go-cmp/cmp"
)

// entry is an Entry in comparable form: its value as text, its error as
// its message.
type entry struct {
	ID, Value, Err string
}

// outcome is what a Scanner reported for a whole answer.
type outcome struct {
	Entries []entry
	Closed  bool
	Err     string
}

// scan feeds pieces to a new Scanner in order and returns what it
// reported.
func scan(pieces ...string) outcome {
	var s pack.Scanner
	var o outcome
	for _, p := range pieces {
		s.Write(p, func(e pack.Entry) {
			got := entry{ID: e.ID, Value: string(e.Value)}
			if e.Err != nil {
				got.Err = e.Err.Error()
				if e.Value != nil {
					got.Value = "<set with Err>"
				}
			}
			o.Entries = append(o.Entries, got)
		})
	}
	o.Closed = s.Closed()
	if err := s.Err(); err != nil {
		o.Err = err.Error()
	}
	return o
}

// bytewise splits s into pieces of one byte.
func bytewise(s string) []string {
	pieces := make([]string, len(s))
	for i := range len(s) {
		pieces[i] = s[i : i+1]
	}
	return pieces
}

var scanTests = []struct {
	name   string
	answer string
	want   outcome
}{
	{
		name:   "strings",
		answer: `{"a1":"yes","a2":"no"}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"yes"`}, {ID: "a2", Value: `"no"`}}, Closed: true},
	},
	{
		name:   "objects, arrays and scalars",
		answer: `{"a1":{"steps":["go","eat"],"n":2},"a2":[1,[2,{}]],"a3":true,"a4":null,"a5":-1.5e3,"a6":0}`,
		want: outcome{Entries: []entry{
			{ID: "a1", Value: `{"steps":["go","eat"],"n":2}`},
			{ID: "a2", Value: `[1,[2,{}]]`},
			{ID: "a3", Value: `true`},
			{ID: "a4", Value: `null`},
			{ID: "a5", Value: `-1.5e3`},
			{ID: "a6", Value: `0`},
		}, Closed: true},
	},
	{
		name:   "fenced",
		answer: "```json\n{\"a1\": {\"x\": 1},\n \"a2\": \"b\"}\n```",
		want:   outcome{Entries: []entry{{ID: "a1", Value: `{"x": 1}`}, {ID: "a2", Value: `"b"`}}, Closed: true},
	},
	{
		name:   "prose before and after",
		answer: "Sure! Here are the answers:\n\n{\"a1\":1}\n\nLet me know if you need more.",
		want:   outcome{Entries: []entry{{ID: "a1", Value: `1`}}, Closed: true},
	},
	{
		name:   "whitespace everywhere",
		answer: " \n{ \r\n\t\"a1\" \n : \t 12 \n , \"a2\"\n:\n[ 1 ,\n 2 ]\r\n,\"a3\":\"x\"  \n}\n",
		want: outcome{Entries: []entry{
			{ID: "a1", Value: `12`},
			{ID: "a2", Value: "[ 1 ,\n 2 ]"},
			{ID: "a3", Value: `"x"`},
		}, Closed: true},
	},
	{
		name:   "brackets and quotes inside strings",
		answer: `{"a1":{"s":"}{][ \"}\" \\","t":["{\\\"","]"]},"a2":"a \"}\" , b\\","a3":"}"}`,
		want: outcome{Entries: []entry{
			{ID: "a1", Value: `{"s":"}{][ \"}\" \\","t":["{\\\"","]"]}`},
			{ID: "a2", Value: `"a \"}\" , b\\"`},
			{ID: "a3", Value: `"}"`},
		}, Closed: true},
	},
	{
		name:   "scalar at the end",
		answer: `{"a1":"x","a2":[],"a3":5}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"x"`}, {ID: "a2", Value: `[]`}, {ID: "a3", Value: `5`}}, Closed: true},
	},
	{
		name:   "escaped keys",
		answer: `{"a\u0031":1,"\ud83d\ude00":2,"é":3,"\"\\/\n":4}`,
		want: outcome{Entries: []entry{
			{ID: "a1", Value: `1`},
			{ID: "😀", Value: `2`},
			{ID: "é", Value: `3`},
			{ID: "\"\\/\n", Value: `4`},
		}, Closed: true},
	},
	{
		name:   "multi-byte runes in values",
		answer: `{"a1":"héllo wörld 日本 😀","a2":{"k":"€"}}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"héllo wörld 日本 😀"`}, {ID: "a2", Value: `{"k":"€"}`}}, Closed: true},
	},
	{
		name:   "invalid values in the middle",
		answer: `{"a1":1,"a2":tru,"a3":{"a":},"a4":"bad \x","a5":01,"a6":"ok"}`,
		want: outcome{Entries: []entry{
			{ID: "a1", Value: `1`},
			{ID: "a2", Err: `pack: entry "a2" at byte 13: the value is not valid JSON: invalid character ' ' in literal true (expecting 'e')`},
			{ID: "a3", Err: `pack: entry "a3" at byte 22: the value is not valid JSON: invalid character '}' looking for beginning of value`},
			{ID: "a4", Err: `pack: entry "a4" at byte 34: the value is not valid JSON: invalid character 'x' in string escape code`},
			{ID: "a5", Err: `pack: entry "a5" at byte 48: the value is not valid JSON: invalid character '1' after top-level value`},
			{ID: "a6", Value: `"ok"`},
		}, Closed: true},
	},
	{
		name:   "missing values",
		answer: `{"a1":,"a2": ,"a3":}`,
		want: outcome{Entries: []entry{
			{ID: "a1", Err: `pack: entry "a1" at byte 6: the value is not valid JSON: unexpected end of JSON input`},
			{ID: "a2", Err: `pack: entry "a2" at byte 13: the value is not valid JSON: unexpected end of JSON input`},
			{ID: "a3", Err: `pack: entry "a3" at byte 19: the value is not valid JSON: unexpected end of JSON input`},
		}, Closed: true},
	},
	{
		name:   "duplicate and unknown keys",
		answer: `{"a1":1,"a1":2,"zz":3,"":4}`,
		want: outcome{Entries: []entry{
			{ID: "a1", Value: `1`}, {ID: "a1", Value: `2`}, {ID: "zz", Value: `3`}, {ID: "", Value: `4`},
		}, Closed: true},
	},
	{
		name:   "empty object",
		answer: "```json\n{ }\n```",
		want:   outcome{Closed: true},
	},
	{
		name:   "a second object is ignored",
		answer: `{"a1":1}{"a2":2}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `1`}}, Closed: true},
	},
	{
		name:   "truncated in a container",
		answer: `{"a1":"x","a2":{"steps":["go",`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"x"`}}},
	},
	{
		name:   "truncated in a scalar",
		answer: `{"a1":"x","a2":12`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"x"`}}},
	},
	{
		name:   "truncated in a key",
		answer: `{"a1":"x","a`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"x"`}}},
	},
	{
		name:   "truncated after a value",
		answer: `{"a1":"x" `,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"x"`}}},
	},
	{
		name:   "no object",
		answer: `I cannot help with that.`,
		want:   outcome{},
	},
	{
		name:   "missing colon",
		answer: `{"a1" 5}`,
		want:   outcome{Err: `pack: answer at byte 6: want ':' after key "a1", found '5'`},
	},
	{
		name:   "unquoted key",
		answer: `{a1: 5}`,
		want:   outcome{Err: `pack: answer at byte 1: want a key (a JSON string) or '}', found 'a'`},
	},
	{
		name:   "array",
		answer: "```json\n[1,2]",
		want:   outcome{Err: `pack: answer at byte 8: the answer is a JSON array, not an object`},
	},
	{
		name:   "missing comma after a string",
		answer: `{"a1":"x" "a2":"y"}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `"x"`}}, Err: `pack: answer at byte 10: want ',' or '}' after the value of "a1", found '"'`},
	},
	{
		name:   "missing comma after a scalar",
		answer: `{"a1":5 6,"a2":1}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `5`}}, Err: `pack: answer at byte 8: want ',' or '}' after the value of "a1", found '6'`},
	},
	{
		name:   "trailing comma",
		answer: `{"a1":5,}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `5`}}, Err: `pack: answer at byte 8: want a key (a JSON string), found '}'`},
	},
	{
		name:   "invalid key escape",
		answer: `{"a1":1,"a\x":2}`,
		want:   outcome{Entries: []entry{{ID: "a1", Value: `1`}}, Err: `pack: answer at byte 8: the key is not a valid JSON string: invalid character 'x' in string escape code`},
	},
	{
		name:   "control character in a key",
		answer: "{\"a\n1\":1}",
		want:   outcome{Err: `pack: answer at byte 1: the key is not a valid JSON string: invalid character '\n' in string literal`},
	},
	{
		name:   "non-ASCII byte where a key belongs",
		answer: "{\xff}",
		want:   outcome{Err: `pack: answer at byte 1: want a key (a JSON string) or '}', found byte 0xff`},
	},
}

func TestScanner(t *testing.T) {
	t.Parallel()
	for _, tt := range scanTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, scan(tt.answer)); diff != "" {
				t.Errorf("scan(%q) mismatch (-want +got):\n%s", tt.answer, diff)
			}
		})
	}
}

// TestScannerSplits feeds each answer of the table in every split in two,
// in three around each byte, and byte by byte: each gives what the whole
// answer gives.
func TestScannerSplits(t *testing.T) {
	t.Parallel()
	for _, tt := range scanTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := tt.answer
			for i := range len(a) + 1 {
				if diff := cmp.Diff(tt.want, scan(a[:i], a[i:])); diff != "" {
					t.Errorf("scan(%q, %q) mismatch (-want +got):\n%s", a[:i], a[i:], diff)
				}
				if i < len(a) {
					if diff := cmp.Diff(tt.want, scan(a[:i], a[i:i+1], "", a[i+1:])); diff != "" {
						t.Errorf("scan split around byte %d mismatch (-want +got):\n%s", i, diff)
					}
				}
			}
			if diff := cmp.Diff(tt.want, scan(bytewise(a)...)); diff != "" {
				t.Errorf("scan of %q byte by byte mismatch (-want +got):\n%s", a, diff)
			}
		})
	}
}

// TestScannerEmitsEarly feeds an answer byte by byte and checks that each
// member is reported by the Write of its value's closing byte (an object,
// an array, a string) or of the byte after it (a scalar), not later.
func TestScannerEmitsEarly(t *testing.T) {
	t.Parallel()
	const answer = `{"a1":{"x":"}"},"a2":"s\"","a3":5 ,"a4":[[1]],"a5":true}` + "\n```"
	want := map[string]int{
		"a1": strings.Index(answer, `},"a2"`),
		"a2": strings.Index(answer, `,"a3"`) - 1,
		"a3": strings.Index(answer, ` ,"a4"`),
		"a4": strings.Index(answer, `,"a5"`) - 1,
		"a5": strings.Index(answer, "}\n"),
	}
	got := map[string]int{}
	var s pack.Scanner
	for i := range len(answer) {
		s.Write(answer[i:i+1], func(e pack.Entry) {
			if e.Err != nil {
				t.Errorf("entry %s: %v", e.ID, e.Err)
			}
			got[e.ID] = i
		})
		if closed, want := s.Closed(), i >= want["a5"]; closed != want {
			t.Errorf("after byte %d: Closed() = %t, want %t", i, closed, want)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("byte of each entry's Write mismatch (-want +got):\n%s", diff)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
}

// TestScannerIgnoresAfterEnd checks that Write reports nothing and keeps
// its state once the object closed or the answer became unreadable.
func TestScannerIgnoresAfterEnd(t *testing.T) {
	t.Parallel()
	for _, first := range []string{`{"a1":1}`, `{"a1" 1}`} {
		var s pack.Scanner
		s.Write(first, func(pack.Entry) {})
		closed, err := s.Closed(), s.Err()
		s.Write(`,"a2":2}{"a3":3}`, func(e pack.Entry) {
			t.Errorf("after %q: Write reported %+v, want nothing", first, e)
		})
		if s.Closed() != closed || s.Err() != err {
			t.Errorf("after %q: Closed, Err = %t, %v; want %t, %v", first, s.Closed(), s.Err(), closed, err)
		}
	}
}

// TestScannerValueIsCopied checks that an entry's Value stays as it was
// while the scanner reads on, and that changing it changes nothing else.
func TestScannerValueIsCopied(t *testing.T) {
	t.Parallel()
	var s pack.Scanner
	var values [][]byte
	for _, p := range bytewise(`{"a1":{"k":"v"},"a2":[9,9,9,9,9,9,9,9,9]}`) {
		s.Write(p, func(e pack.Entry) {
			values = append(values, e.Value)
			if len(values) == 1 {
				e.Value[0] = 'X'
			}
		})
	}
	got := []string{string(values[0]), string(values[1])}
	want := []string{`X"k":"v"}`, `[9,9,9,9,9,9,9,9,9]`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values mismatch (-want +got):\n%s", diff)
	}
}
