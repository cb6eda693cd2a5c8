package input_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/input"
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
		`{"name":"a","name":"EVIL"}`,
		`{"a":{"b":1,"b":2}}`,
		`{"a":[{"x":1},{"x":1,"x":2}]}`,
		`{"a":1,"\u0061":2}`,
		`{"a":{"a":1},"b":{"a":1}}`,
		`{"a":"\ud800"}`,
		`{"a":"\udc00\ud800"}`,
		`{"a":"\\ud800"}`,
		`{"a":"\ufffd"}`,
		"{\"a\":\"\xed\xa0\x80\"}",
		"{\"\xff\":1,\"\xff\":2}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		yields := 0
		for in, err := range input.JSONL(bytes.NewReader(data), "fuzz.jsonl") {
			yields++
			if err != nil {
				var ie *input.Error
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
	for in, err := range input.JSONL(bytes.NewReader(data), "") {
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
	// encoding/json accepts duplicate keys (last wins) and replaces invalid
	// UTF-8 and lone surrogate escapes with U+FFFD; JSONL must refuse those
	// lines, and only those.
	dup := hasDuplicateKey(t, line)
	// The token stream, not wantMap: a duplicate key's overwritten value
	// may hold the only lone surrogate (`{"":"\ud800","":""}`).
	replaced := stringTokensContainRune(t, line, utf8.RuneError)
	badText := !utf8.Valid(line) ||
		replaced && !bytes.Contains(line, []byte("\uFFFD")) &&
			!bytes.Contains(bytes.ToLower(line), []byte(`\ufffd`))
	switch {
	case errs[0] == nil && (dup || badText):
		t.Fatalf("JSONL(%q) = %v, nil, want an error (duplicate key %v, invalid UTF-8 %v)", data, rows[0], dup, badText)
	case errors.Is(errs[0], input.ErrDuplicateKey) && !dup:
		t.Fatalf("JSONL(%q) error %v, but the line has no duplicate key", data, errs[0])
	case errors.Is(errs[0], input.ErrInvalidUTF8) && !replaced && utf8.Valid(line):
		t.Fatalf("JSONL(%q) error %v, but the line's text is valid", data, errs[0])
	case errs[0] != nil && (dup || badText):
		if !errors.Is(errs[0], input.ErrDuplicateKey) && !errors.Is(errs[0], input.ErrInvalidUTF8) {
			t.Fatalf("JSONL(%q) error %v, want one wrapping ErrDuplicateKey or ErrInvalidUTF8", data, errs[0])
		}
		return
	case errs[0] != nil:
		t.Fatalf("JSONL(%q) error %v, want %v as encoding/json decodes it", data, errs[0], wantMap)
	}
	// reflect.DeepEqual first: cmp.Diff can take exponential time on deep nesting.
	if !reflect.DeepEqual(job.Input(wantMap), rows[0]) {
		t.Fatalf("JSONL(%q) differs from encoding/json (-want +got):\n%s", data, cmp.Diff(job.Input(wantMap), rows[0]))
	}
}

// hasDuplicateKey reports whether some object in line, which encoding/json
// accepts, names a key twice. It walks encoding/json's token stream, apart
// from the decoder JSONL uses.
func hasDuplicateKey(t *testing.T, line []byte) bool {
	t.Helper()
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // io.EOF; other errors cannot happen on a line encoding/json decoded
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.wantKey {
			if top.keys[s] {
				return true
			}
			top.keys[s] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				top = stack[len(stack)-1]
			} else {
				top = nil
			}
		}
		if top != nil && top.object {
			top.wantKey = true // a value ended
		}
	}
}

// stringTokensContainRune reports whether r occurs in a string token (key or
// value) of line, which encoding/json accepts, as encoding/json decodes it.
// Unlike the decoded map, the token stream keeps the values of keys that a
// duplicate key overwrote.
func stringTokensContainRune(t *testing.T, line []byte, r rune) bool {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // io.EOF; other errors cannot happen on a line encoding/json decoded
		}
		if s, ok := tok.(string); ok && strings.ContainsRune(s, r) {
			return true
		}
	}
}

func FuzzCSVInput(f *testing.F) {
	for _, s := range []string{
		"",
		"a\n",
		"a,b\n1,2\n",
		"\xEF\xBB\xBFa\n1\n",
		"a,a\n1,2\n",
		"a,b\n1\n1,2,3\n",
		"a\n\"x\ny\"\n",
		"a\nx\"y\n",
		"a\n\xff\n2\n",
		"a,b\n1,\"\xc3\"\n",
		"n\xe9\n1\n",
		"a\r\n\r\n1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		for in, err := range input.CSV(bytes.NewReader(data), "fuzz.csv") {
			if err != nil {
				var ie *input.Error
				if !errors.As(err, &ie) || ie.Line < 1 || ie.Line > lines {
					t.Fatalf("CSV(%q) error %v, want *InputError with line in 1..%d", data, err, lines)
				}
				if in != nil {
					t.Fatalf("CSV(%q) yielded %v with error %v, want nil", data, in, err)
				}
				continue
			}
			if in == nil {
				t.Fatalf("CSV(%q) yielded a nil Input with a nil error", data)
			}
			for k, v := range in {
				if s, _ := v.(string); !utf8.ValidString(k) || !utf8.ValidString(s) {
					t.Fatalf("CSV(%q) yielded %q: %q, want valid UTF-8 only", data, k, v)
				}
			}
		}
	})
}
