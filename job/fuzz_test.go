package job_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/job"
)

func FuzzJSONLInput(f *testing.F) {
	for _, s := range []string{
		"",
		"\n",
		`{"a":1}`,
		"{\"a\":1}\n{\"b\":\"x\"}\n",
		"{\"a\":\n{\"b\":2}\r\n",
		"\xEF\xBB\xBF{}\n",
		"[1,2]\n3\nnull\n\"s\"\n",
		`{"a":1} {"b":2}`,
		`{"a":{"b":[1,{"c":null}]}}`,
		"{\"a\":\"\\ud800\"}\n{\"\xff\":1}",
		"  \t\r\n\n{}",
		`{"s":"a\"b\\c\/d\b\f\n\r\t","u":"\u00e9\u4e2d\ud83d\ude00","bad":"\ud800x\udc00"}`,
		`{"n":[-0,0.5,1e10,-2.5E-3,1E+2],"e":[],"o":{},"t":true,"f":false,"z":null}`,
		"{\"k\":\"h\u00e9llo \xe2\x9c\x93\"}",
		`{"a":01}`,
		`{"a":1.}`,
		`{"a":-}`,
		`{"a":"\x"}`,
		`{"a":[1,]}`,
		`{"a":1,}`,
		`{"a" "b"}`,
		`{"a":tru}`,
		`{"a":nulll}`,
		`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		"{\"tab\":\"a\tb\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		yields := 0
		for in, err := range job.JSONL(bytes.NewReader(data), "fuzz.jsonl") {
			yields++
			if err != nil {
				var ie *job.InputError
				if !errors.As(err, &ie) || ie.Line < 1 || ie.Line > lines {
					t.Fatalf("JSONL(%q) error %v, want *InputError with line in 1..%d", data, err, lines)
				}
				if in != nil {
					t.Fatalf("JSONL(%q) yielded %v with error %v, want nil", data, in, err)
				}
				continue
			}
			if in == nil {
				t.Fatalf("JSONL(%q) yielded a nil Input with a nil error", data)
			}
		}
		if yields > lines+1 {
			t.Fatalf("JSONL(%q) yielded %d times for %d lines", data, yields, lines)
		}
		if lines == 1 {
			checkLineLikeEncodingJSON(t, data)
		}
	})
}

// checkLineLikeEncodingJSON checks that JSONL decodes the single line data
// exactly as encoding/json does with UseNumber, or fails where it fails.
func checkLineLikeEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	line := bytes.Trim(bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF")), " \t\r\n")
	var rows []job.Input
	var errs []error
	for in, err := range job.JSONL(bytes.NewReader(data), "") {
		rows = append(rows, in)
		errs = append(errs, err)
	}
	if len(line) == 0 {
		if len(rows) != 0 {
			t.Fatalf("JSONL(%q) yielded %d rows for a blank line, want none", data, len(rows))
		}
		return
	}
	if len(rows) != 1 {
		t.Fatalf("JSONL(%q) yielded %d rows for one line, want 1", data, len(rows))
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var want any
	err := dec.Decode(&want)
	wantMap, isObject := want.(map[string]any)
	if err != nil || !isObject || dec.InputOffset() != int64(len(line)) {
		if errs[0] == nil {
			t.Fatalf("JSONL(%q) = %v, nil, want an error as encoding/json gives (%v, %v)", data, rows[0], want, err)
		}
		return
	}
	if errs[0] != nil {
		t.Fatalf("JSONL(%q) error %v, want %v as encoding/json decodes it", data, errs[0], wantMap)
	}
	// reflect.DeepEqual first: cmp.Diff can take exponential time on deep nesting.
	if !reflect.DeepEqual(job.Input(wantMap), rows[0]) {
		t.Fatalf("JSONL(%q) differs from encoding/json (-want +got):\n%s", data, cmp.Diff(job.Input(wantMap), rows[0]))
	}
}

func FuzzTemplateRender(f *testing.F) {
	for _, s := range []string{
		"",
		"plain",
		"Hello {name}!",
		"{user.name} is {user.age}",
		"{{literal}} {name}",
		"{{{name}}}",
		"{",
		"}",
		"{}",
		"{a..b}",
		"{1x}",
		"{tags.0}{tags.5}",
		"héllo\n{missing}",
		"{name.x.y}",
	} {
		f.Add(s)
	}
	in := job.Input{
		"name": "Ada",
		"n":    3,
		"user": map[string]any{"name": "Bob", "age": 9.5},
		"tags": []any{"a", nil},
		"ok":   true,
	}
	f.Fuzz(func(t *testing.T, text string) {
		tmpl, err := job.ParseTemplate(text)
		if err != nil {
			var se *job.TemplateSyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset >= len(text) || se.Line < 1 || se.Col < 1 {
				t.Fatalf("ParseTemplate(%q) error %#v, want a *TemplateSyntaxError within the text", text, err)
			}
			return
		}
		out, err := tmpl.Render(in)
		if err != nil {
			var mf *job.MissingFieldError
			if !errors.As(err, &mf) {
				t.Fatalf("Render(%q) error %v, want only *MissingFieldError", text, err)
			}
			top, _, _ := strings.Cut(mf.Field, ".")
			if _, ok := in[top]; ok && mf.Field == top {
				t.Fatalf("Render(%q) says field %q is missing, but the input has it", text, mf.Field)
			}
			return
		}
		if !strings.ContainsAny(text, "{}") && out != text {
			t.Fatalf("Render(%q) = %q, want the text unchanged", text, out)
		}
		for _, name := range tmpl.Fields() {
			if _, ok := in[name]; !ok {
				t.Fatalf("Render(%q) succeeded though input lacks field %q", text, name)
			}
		}
	})
}
