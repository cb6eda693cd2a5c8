package input_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// arrayItem is one item of a JSONArray sequence as the tests compare it.
type arrayItem struct {
	Row  job.Input
	Line int    // of an error
	Err  string // the error's message, "" for a row
}

func readArray(src string) []arrayItem {
	var got []arrayItem
	for in, err := range input.JSONArray(strings.NewReader(src), "in.json") {
		if err != nil {
			var ie *input.Error
			if !errors.As(err, &ie) {
				return append(got, arrayItem{Err: "not an *input.Error: " + err.Error()})
			}
			got = append(got, arrayItem{Line: ie.Line, Err: err.Error()})
			continue
		}
		got = append(got, arrayItem{Row: in})
	}
	return got
}

func TestJSONArray(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []arrayItem
	}{
		{"empty array", "[]", nil},
		{"rows", "\xEF\xBB\xBF[\n  {\"a\": 1},\n  {\"b\": \"x\", \"n\": 12345678901234567890}\n]\n", []arrayItem{
			{Row: job.Input{"a": json.Number("1")}},
			{Row: job.Input{"b": "x", "n": json.Number("12345678901234567890")}},
		}},
		{"element not an object", "[\n{\"a\":1},\n2,\n{\"a\":3}\n]", []arrayItem{
			{Row: job.Input{"a": json.Number("1")}},
			{Line: 3, Err: "in.json:3: element 1: a JSON number, want an object"},
			{Row: job.Input{"a": json.Number("3")}},
		}},
		{"syntax error ends", "[{\"a\":1},\n{\"a\":}]", []arrayItem{
			{Row: job.Input{"a": json.Number("1")}},
			{Line: 2, Err: "in.json:2: element 1: "},
		}},
		{"duplicate key", "[{\"a\":1,\"a\":2}]", []arrayItem{
			{Line: 1, Err: "in.json:1: element 0: "},
		}},
		{"not an array", "{\"a\":1}", []arrayItem{
			{Line: 1, Err: "in.json:1: the input is a JSON object, want an array of objects"},
		}},
		{"empty input", "  \n", []arrayItem{
			{Line: 1, Err: "in.json:1: empty input: want a JSON array of objects"},
		}},
		{"data after", "[{}] [", []arrayItem{
			{Row: job.Input{}},
			{Line: 1, Err: "in.json:1: "},
		}},
		{"unterminated", "[{}", []arrayItem{
			{Row: job.Input{}},
			{Line: 1, Err: "in.json:1: element 1: "},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := readArray(tt.src)
			// Error messages are compared by their prefix: the rest is
			// the JSON decoder's wording.
			for i := range got {
				if i < len(tt.want) && tt.want[i].Err != "" && strings.HasPrefix(got[i].Err, tt.want[i].Err) {
					got[i].Err = tt.want[i].Err
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("JSONArray(%q) (-want +got):\n%s", tt.src, diff)
			}
			n, err := input.CountJSONArray(strings.NewReader(tt.src))
			if err != nil || n != len(tt.want) {
				t.Errorf("CountJSONArray(%q) = %d, %v; want %d, nil", tt.src, n, err, len(tt.want))
			}
		})
	}
}

func TestJSONArrayReadError(t *testing.T) {
	r := iotest.TimeoutReader(strings.NewReader("[" + strings.Repeat(`{"a":1},`, 20000)))
	var last error
	for _, err := range input.JSONArray(r, "in.json") {
		last = err
	}
	if !errors.Is(last, iotest.ErrTimeout) {
		t.Errorf("JSONArray of a failing reader ended with %v, want its error", last)
	}
	r = iotest.TimeoutReader(strings.NewReader("[" + strings.Repeat(`{"a":1},`, 20000)))
	if _, err := input.CountJSONArray(r); !errors.Is(err, iotest.ErrTimeout) {
		t.Errorf("CountJSONArray of a failing reader = %v, want its error", err)
	}
}

func TestJSONArrayFieldsAndLines(t *testing.T) {
	src := "[\n  3,\n  {\"b\": 1, \"a\": 2},\n\n  {\"c\": 3}\n]"
	got, err := input.JSONArrayFields(strings.NewReader(src), "in.json")
	if diff := cmp.Diff([]string{"a", "b"}, got); err != nil || diff != "" {
		t.Errorf("JSONArrayFields = %v, %v; want [a b]", got, err)
	}
	for i, want := range []int{2, 3, 5} {
		if line, err := input.LineJSONArray(strings.NewReader(src), i); err != nil || line != want {
			t.Errorf("LineJSONArray(%d) = %d, %v; want %d", i, line, err, want)
		}
	}
	if _, err := input.LineJSONArray(strings.NewReader(src), 3); err == nil {
		t.Error("LineJSONArray(3) of three elements: no error")
	}
}

func FuzzJSONArray(f *testing.F) {
	for _, s := range []string{
		"", "[]", "[{}]", "\xEF\xBB\xBF[{\"a\":1}]", "[{\"a\":1},2,\"s\",null,[1]]",
		"[{\"a\":1,\"a\":2}]", "[{\"a\":\"\\ud800\"}]", "[{\"a\":1}", "[{}] x", "{\"a\":1}",
		"[\n{\"a\":\n{\"b\":[1,2]}},\n{\"c\":1e400}\n]", "[{\"\xff\":1}]", "[,]", "[{},]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		items := 0
		lines := strings.Count(string(data), "\n") + 1
		for in, err := range input.JSONArray(strings.NewReader(string(data)), "f.json") {
			items++
			if err != nil {
				var ie *input.Error
				if !errors.As(err, &ie) || ie.Line < 1 || ie.Line > lines {
					t.Fatalf("error %v: not an *input.Error with a line in 1..%d", err, lines)
				}
				continue
			}
			if in == nil {
				t.Fatal("a row without an error is nil")
			}
			if _, err := json.Marshal(in); err != nil {
				t.Fatalf("row %v does not encode: %v", in, err)
			}
		}
		n, err := input.CountJSONArray(strings.NewReader(string(data)))
		if err != nil || n != items {
			t.Fatalf("CountJSONArray = %d, %v; JSONArray yields %d", n, err, items)
		}
	})
}
