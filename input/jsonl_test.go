package input_test

import (
	"encoding/json"
	"errors"
	"io"
	"iter"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// row is one yield of an input sequence, in a form cmp can compare.
type row struct {
	In   job.Input
	Line int    // InputError.Line, when Err is set
	Err  string // err.Error(), or ""
}

// collect drains seq, checking that every error is an *InputError, that it
// wraps cause when cause is not nil, and that no Input comes with it.
func collect(t *testing.T, seq iter.Seq2[job.Input, error], cause error) []row {
	t.Helper()
	var rows []row
	for in, err := range seq {
		if err == nil {
			if in == nil {
				t.Errorf("sequence yielded a nil Input with a nil error")
			}
			rows = append(rows, row{In: in})
			continue
		}
		if in != nil {
			t.Errorf("sequence yielded Input %v with error %v, want nil", in, err)
		}
		if cause != nil && !errors.Is(err, cause) {
			t.Errorf("sequence yielded error %v, want it to wrap %v", err, cause)
		}
		r := row{Err: err.Error()}
		if ie, ok := errors.AsType[*input.Error](err); ok {
			r.Line = ie.Line
		} else {
			t.Errorf("sequence yielded error %T %v, want *input.Error", err, err)
		}
		rows = append(rows, r)
	}
	return rows
}

func TestJSONL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  []row
	}{
		{"empty", "", nil},
		{"only blank lines", "\n  \n\t\r\n", nil},
		{
			"valid rows",
			"{\"id\":1,\"name\":\"a\"}\n{\"id\":2.5,\"ok\":true,\"x\":null}\n",
			[]row{
				{In: job.Input{"id": json.Number("1"), "name": "a"}},
				{In: job.Input{"id": json.Number("2.5"), "ok": true, "x": nil}},
			},
		},
		{
			"nested values",
			`{"u":{"n":"b","tags":["x",1]}}`,
			[]row{{In: job.Input{"u": map[string]any{"n": "b", "tags": []any{"x", json.Number("1")}}}}},
		},
		{"no final newline", `{"a":"1"}` + "\n" + `{"a":"2"}`, []row{{In: job.Input{"a": "1"}}, {In: job.Input{"a": "2"}}}},
		{"empty object", "{}\n", []row{{In: job.Input{}}}},
		{
			"blank lines skipped but counted",
			"\n{\"a\":\"1\"}\n   \n\n{\"a\":\"2\"}\n{bad\n",
			[]row{
				{In: job.Input{"a": "1"}},
				{In: job.Input{"a": "2"}},
				{Line: 6, Err: "in.jsonl:6: invalid JSON: invalid character 'b' looking for beginning of object key string"},
			},
		},
		{
			"malformed line in the middle",
			"{\"a\":\"1\"}\n{\"a\":\n{\"a\":\"3\"}\n",
			[]row{
				{In: job.Input{"a": "1"}},
				{Line: 2, Err: "in.jsonl:2: invalid JSON: unexpected end of JSON input"},
				{In: job.Input{"a": "3"}},
			},
		},
		{
			"non-object lines",
			"[1,2]\n3\n\"s\"\nnull\ntrue\n{\"a\":\"ok\"}\n",
			[]row{
				{Line: 1, Err: "in.jsonl:1: not a JSON object: found an array"},
				{Line: 2, Err: "in.jsonl:2: not a JSON object: found a number"},
				{Line: 3, Err: "in.jsonl:3: not a JSON object: found a string"},
				{Line: 4, Err: "in.jsonl:4: not a JSON object: found null"},
				{Line: 5, Err: "in.jsonl:5: not a JSON object: found a boolean"},
				{In: job.Input{"a": "ok"}},
			},
		},
		{
			"non-object lines with numbers beyond float64",
			"1e999\n[1e999]\n",
			[]row{
				{Line: 1, Err: "in.jsonl:1: not a JSON object: found a number"},
				{Line: 2, Err: "in.jsonl:2: not a JSON object: found an array"},
			},
		},
		{
			"invalid non-object line",
			"[1,\n",
			[]row{{Line: 1, Err: "in.jsonl:1: invalid JSON: unexpected end of JSON input"}},
		},
		{
			"two objects on a line",
			"{\"a\":\"1\"} {\"a\":\"2\"}\n{\"a\":\"3\"}\n",
			[]row{
				{Line: 1, Err: "in.jsonl:1: invalid JSON: invalid character '{' after top-level value"},
				{In: job.Input{"a": "3"}},
			},
		},
		{
			"trailing garbage",
			"{\"a\":\"1\"}x\n{\"a\":\"2\"}\n",
			[]row{
				{Line: 1, Err: "in.jsonl:1: invalid JSON: invalid character 'x' after top-level value"},
				{In: job.Input{"a": "2"}},
			},
		},
		{
			"error after several good lines resets cleanly",
			"{\"a\":\"1\"}\n{\"a\":\"2\"}\n{\"a\"}\n{\"a\":\"4\"}\n{\"a\":\"5\"}\n",
			[]row{
				{In: job.Input{"a": "1"}},
				{In: job.Input{"a": "2"}},
				{Line: 3, Err: "in.jsonl:3: invalid JSON: invalid character '}' after object key"},
				{In: job.Input{"a": "4"}},
				{In: job.Input{"a": "5"}},
			},
		},
		{
			"CRLF",
			"{\"a\":\"1\"}\r\n\r\n{\"a\":\"2\"}\r\n",
			[]row{{In: job.Input{"a": "1"}}, {In: job.Input{"a": "2"}}},
		},
		{
			"surrounding whitespace",
			"  \t{\"a\":\"1\"}  \n",
			[]row{{In: job.Input{"a": "1"}}},
		},
		{
			"BOM",
			"\xEF\xBB\xBF{\"a\":\"1\"}\n{\"a\":\"2\"}\n",
			[]row{{In: job.Input{"a": "1"}}, {In: job.Input{"a": "2"}}},
		},
		{
			"BOM only on first line",
			"{\"a\":\"1\"}\n\xEF\xBB\xBF{\"a\":\"2\"}\n",
			[]row{
				{In: job.Input{"a": "1"}},
				{Line: 2, Err: "in.jsonl:2: invalid JSON: invalid character 'ï' looking for beginning of value"},
			},
		},
		{
			"duplicate key fails that line only",
			"{\"name\":\"a\"}\n{\"name\":\"a\",\"name\":\"EVIL\"}\n{\"name\":\"c\"}\n",
			[]row{
				{In: job.Input{"name": "a"}},
				{Line: 2, Err: `in.jsonl:2: duplicate key "name"`},
				{In: job.Input{"name": "c"}},
			},
		},
		{
			"duplicate key spelled with an escape",
			`{"a":"1","\u0061":"2"}`,
			[]row{{Line: 1, Err: `in.jsonl:1: duplicate key "a"`}},
		},
		{
			"duplicate key in a nested object",
			`{"a":{"b":{"c":1,"c":2}}}`,
			[]row{{Line: 1, Err: `in.jsonl:1: duplicate key "c" at $.a.b.c`}},
		},
		{
			"duplicate key in an object in an array",
			`{"list":[{"x":1},{"x":1,"y":2,"x":3}]}`,
			[]row{{Line: 1, Err: `in.jsonl:1: duplicate key "x" at $.list[1].x`}},
		},
		{
			"duplicate key under a key that is not a plain name",
			`{"a b":{"k":1,"k":1}}`,
			[]row{{Line: 1, Err: `in.jsonl:1: duplicate key "k" at $["a b"].k`}},
		},
		{
			"same key in different objects is fine",
			`{"a":{"a":1},"b":{"a":2},"c":[{"a":3},{"a":4}]}`,
			[]row{{In: job.Input{
				"a": map[string]any{"a": json.Number("1")},
				"b": map[string]any{"a": json.Number("2")},
				"c": []any{map[string]any{"a": json.Number("3")}, map[string]any{"a": json.Number("4")}},
			}}},
		},
		{
			"invalid UTF-8 in a value fails that line only",
			"{\"a\":\"1\"}\n{\"a\":\"x\xffy\"}\n{\"a\":\"3\"}\n",
			[]row{
				{In: job.Input{"a": "1"}},
				{Line: 2, Err: "in.jsonl:2: invalid UTF-8: byte 0xff at column 8"},
				{In: job.Input{"a": "3"}},
			},
		},
		{
			"invalid UTF-8 in a nested key",
			"{\"a\":{\"\xc3\":1}}",
			[]row{{Line: 1, Err: "in.jsonl:1: invalid UTF-8: byte 0xc3 at column 8"}},
		},
		{
			"lone high surrogate",
			`{"a":"\ud800"}`,
			[]row{{Line: 1, Err: `in.jsonl:1: invalid UTF-8: lone surrogate escape \ud800 in a string at $.a`}},
		},
		{
			"lone low surrogate in a nested array",
			`{"a":{"b":["ok","x\uDC00"]}}`,
			[]row{{Line: 1, Err: `in.jsonl:1: invalid UTF-8: lone surrogate escape \uDC00 in a string at $.a.b[1]`}},
		},
		{
			"high surrogate followed by a non-surrogate escape",
			`{"a":"\ud83d\u0041"}`,
			[]row{{Line: 1, Err: `in.jsonl:1: invalid UTF-8: lone surrogate escape \ud83d in a string at $.a`}},
		},
		{
			"lone surrogate in a key",
			`{"\ud800":1}`,
			[]row{{Line: 1, Err: `in.jsonl:1: invalid UTF-8: lone surrogate escape \ud800 in a string at $`}},
		},
		{
			"surrogate pairs, escaped backslashes and U+FFFD itself are fine",
			`{"e":"\ud83d\ude00","b":"\\ud800","r":"\ufffd","l":"` + "\uFFFD" + `"}`,
			[]row{{In: job.Input{"e": "\U0001F600", "b": `\ud800`, "r": "\uFFFD", "l": "\uFFFD"}}},
		},
		{
			"big numbers keep their text",
			`{"n":12345678901234567890123,"f":1e400}`,
			[]row{{In: job.Input{"n": json.Number("12345678901234567890123"), "f": json.Number("1e400")}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := collect(t, input.JSONL(strings.NewReader(tt.input), "in.jsonl"), nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("JSONL(%q) mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func TestJSONLNoSource(t *testing.T) {
	t.Parallel()
	got := collect(t, input.JSONL(strings.NewReader("{}\n{\n"), ""), nil)
	want := []row{{In: job.Input{}}, {Line: 2, Err: "line 2: invalid JSON: unexpected end of JSON input"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSONL without source mismatch (-want +got):\n%s", diff)
	}
}

func TestJSONLErrorUnwraps(t *testing.T) {
	t.Parallel()
	for _, err := range input.JSONL(strings.NewReader(`{"a":`), "f") {
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("JSONL error = %v, want one wrapping *json.SyntaxError", err)
		}
	}
}

func TestJSONLErrorsWrapSentinels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input string
		want  error
	}{
		{`{"name":"a","name":"EVIL"}`, input.ErrDuplicateKey},
		{`{"a":[{"b":{"c":1,"c":1}}]}`, input.ErrDuplicateKey},
		{"{\"a\":\"\xff\"}", input.ErrInvalidUTF8},
		{`{"a":"\ud800"}`, input.ErrInvalidUTF8},
		{`{"a":["\udfff"]}`, input.ErrInvalidUTF8},
		// A number beyond float64's range is legal JSON and kept as text
		// (json.Number); it must not hide the line's real problem.
		{`{"n":1e999,"name":"a","name":"EVIL"}`, input.ErrDuplicateKey},
		{"{\"n\":1e999,\"a\":\"\xff\"}", input.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		n := 0
		for in, err := range input.JSONL(strings.NewReader(tt.input), "f") {
			n++
			if in != nil || !errors.Is(err, tt.want) {
				t.Errorf("JSONL(%q) = %v, %v, want an error wrapping %v", tt.input, in, err, tt.want)
			}
		}
		if n != 1 {
			t.Errorf("JSONL(%q) yielded %d times, want 1", tt.input, n)
		}
	}
}

func TestJSONLLongLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3<<20) // longer than any internal buffer
	data := `{"a":"1"}` + "\n" + `{"big":"` + long + `"}` + "\n" + `{"a":"3"}` + "\n" +
		`{"bad":"` + long + "\n" + `{"a":"5"}` + "\n"
	got := collect(t, input.JSONL(strings.NewReader(data), "in.jsonl"), nil)
	want := []row{
		{In: job.Input{"a": "1"}},
		{In: job.Input{"big": long}},
		{In: job.Input{"a": "3"}},
		{Line: 4, Err: "in.jsonl:4: invalid JSON: unexpected end of JSON input"},
		{In: job.Input{"a": "5"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSONL with a 3 MiB line mismatch (-want +got):\n%.2000s", diff)
	}
}

func TestJSONLEarlyBreak(t *testing.T) {
	t.Parallel()
	r := &countingReader{r: strings.NewReader(strings.Repeat(`{"a":"1"}`+"\n", 100000))}
	n := 0
	for in, err := range input.JSONL(r, "in.jsonl") {
		if err != nil || in["a"] != "1" {
			t.Fatalf("JSONL yielded %v, %v, want {a:1}, nil", in, err)
		}
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("loop ran %d times, want 3", n)
	}
	if r.n >= 1000000 {
		t.Errorf("JSONL read %d bytes before a break after 3 rows, want it to stop early", r.n)
	}

	// Breaking on an error row stops too.
	n = 0
	for range input.JSONL(strings.NewReader("x\ny\nz\n"), "") {
		n++
		break
	}
	if n != 1 {
		t.Errorf("loop over error rows ran %d times after break, want 1", n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestJSONLReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	tests := []struct {
		name string
		r    io.Reader
		want []row
	}{
		{
			"at start",
			iotest.ErrReader(boom),
			[]row{{Line: 1, Err: "in.jsonl:1: read: disk on fire"}},
		},
		{
			"after two lines",
			io.MultiReader(strings.NewReader("{\"a\":\"1\"}\n\n"), iotest.ErrReader(boom)),
			[]row{{In: job.Input{"a": "1"}}, {Line: 3, Err: "in.jsonl:3: read: disk on fire"}},
		},
		{
			"mid line",
			io.MultiReader(strings.NewReader("{\"a\":\"1\"}\n{\"a\":"), iotest.ErrReader(boom)),
			[]row{{In: job.Input{"a": "1"}}, {Line: 2, Err: "in.jsonl:2: read: disk on fire"}},
		},
		{
			"one byte at a time",
			iotest.OneByteReader(strings.NewReader("{\"a\":\"1\"}\n{\"a\":\"2\"}")),
			[]row{{In: job.Input{"a": "1"}}, {In: job.Input{"a": "2"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := collect(t, input.JSONL(tt.r, "in.jsonl"), boom)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("JSONL mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSlice(t *testing.T) {
	t.Parallel()
	in := []job.Input{{"a": "1"}, nil, {"a": "3"}}
	var got []job.Input
	for x, err := range input.Slice(in) {
		if err != nil {
			t.Fatalf("Slice yielded error %v, want nil", err)
		}
		got = append(got, x)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("Slice mismatch (-want +got):\n%s", diff)
	}
	n := 0
	for range input.Slice(in) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("Slice loop ran %d times after break, want 1", n)
	}
}

func TestInputErrorMessage(t *testing.T) {
	t.Parallel()
	inner := errors.New("boom")
	tests := []struct {
		err  *input.Error
		want string
	}{
		{&input.Error{Source: "inputs.jsonl", Line: 3, Err: inner}, "inputs.jsonl:3: boom"},
		{&input.Error{Line: 3, Err: inner}, "line 3: boom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q, want %q", tt.err, got, tt.want)
		}
		if !errors.Is(tt.err, inner) {
			t.Errorf("errors.Is(%v, inner) = false, want true", tt.err)
		}
	}
}
