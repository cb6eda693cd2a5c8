package input_test

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

func TestCSV(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  []row
	}{
		{
			"header and rows",
			"id,name\n1,Ada\n2,Bob\n",
			[]row{{In: job.Input{"id": "1", "name": "Ada"}}, {In: job.Input{"id": "2", "name": "Bob"}}},
		},
		{"header only", "id,name\n", nil},
		{"no final newline", "a\nx", []row{{In: job.Input{"a": "x"}}}},
		{"CRLF", "a,b\r\n1,2\r\n", []row{{In: job.Input{"a": "1", "b": "2"}}}},
		{"BOM", "\xEF\xBB\xBF\"id\",name\n1,x\n", []row{{In: job.Input{"id": "1", "name": "x"}}}},
		{"empty values", "a,b\n,\n", []row{{In: job.Input{"a": "", "b": ""}}}},
		{
			"quoted fields with commas, quotes and newlines; lines counted",
			"id,text\n1,\"a, b\"\n2,\"line1\nline2\nline3\"\n3,\"say \"\"hi\"\"\"\n4,x,extra\n",
			[]row{
				{In: job.Input{"id": "1", "text": "a, b"}},
				{In: job.Input{"id": "2", "text": "line1\nline2\nline3"}},
				{In: job.Input{"id": "3", "text": `say "hi"`}},
				{Line: 7, Err: "in.csv:7: wrong number of fields: got 3, header has 2"},
			},
		},
		{
			"wrong field count, then continue",
			"a,b\n1\n1,2,3\n4,5\n",
			[]row{
				{Line: 2, Err: "in.csv:2: wrong number of fields: got 1, header has 2"},
				{Line: 3, Err: "in.csv:3: wrong number of fields: got 3, header has 2"},
				{In: job.Input{"a": "4", "b": "5"}},
			},
		},
		{
			"blank lines skipped but counted",
			"a\n\nx\n\n\ny,z\n",
			[]row{
				{In: job.Input{"a": "x"}},
				{Line: 6, Err: "in.csv:6: wrong number of fields: got 2, header has 1"},
			},
		},
		{
			"bare quote, then continue",
			"a,b\n1,x\"y\n3,4\n",
			[]row{
				{Line: 2, Err: "in.csv:2: invalid CSV at column 4: bare \" in non-quoted-field"},
				{In: job.Input{"a": "3", "b": "4"}},
			},
		},
		{
			"extraneous quote in quoted field",
			"a,b\n1,\"x\"y\n3,4\n",
			[]row{
				{Line: 2, Err: "in.csv:2: invalid CSV at column 5: extraneous or missing \" in quoted-field"},
				{In: job.Input{"a": "3", "b": "4"}},
			},
		},
		{
			"unterminated quote runs to the end",
			"a,b\n1,2\n3,\"open\n5,6\n",
			[]row{
				{In: job.Input{"a": "1", "b": "2"}},
				{Line: 3, Err: "in.csv:3: invalid CSV at line 4, column 5: extraneous or missing \" in quoted-field"},
			},
		},
		{"empty input", "", []row{{Line: 1, Err: "in.csv:1: empty input: no CSV header"}}},
		{"blank input", "\n\n", []row{{Line: 1, Err: "in.csv:1: empty input: no CSV header"}}},
		{
			"duplicate header",
			"id,name,id\n1,2,3\n",
			[]row{{Line: 1, Err: `in.csv:1: header: duplicate name "id" in columns 1 and 3`}},
		},
		{
			"empty header name",
			"\nid,,x\n1,2,3\n",
			[]row{{Line: 2, Err: "in.csv:2: header: column 2 has an empty name"}},
		},
		{
			"invalid UTF-8 fails that record only",
			"id,name\n1,Ada\n2,B\xffb\n3,\"multi\nline \xc3\"\n4,Dan\n",
			[]row{
				{In: job.Input{"id": "1", "name": "Ada"}},
				{Line: 3, Err: `in.csv:3: invalid UTF-8 in column 2 ("name")`},
				{Line: 4, Err: `in.csv:4: invalid UTF-8 in column 2 ("name")`},
				{In: job.Input{"id": "4", "name": "Dan"}},
			},
		},
		{
			"invalid UTF-8 in the header",
			"id,n\xe9\n1,2\n",
			[]row{{Line: 1, Err: "in.csv:1: header: invalid UTF-8 in column 2"}},
		},
		{
			"U+FFFD itself is fine",
			"a\n\uFFFD\n",
			[]row{{In: job.Input{"a": "\uFFFD"}}},
		},
		{
			"bad header quote",
			"id,na\"me\n1,2\n",
			[]row{{Line: 1, Err: "in.csv:1: header: invalid CSV at column 6: bare \" in non-quoted-field"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := collect(t, input.CSV(strings.NewReader(tt.input), "in.csv"), nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CSV(%q) mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func TestCSVErrorsWrapSentinels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input string
		want  error
	}{
		{"a,b\n1\n", csv.ErrFieldCount},
		{"a\nx\"y\n", csv.ErrBareQuote},
		{"a\n\"x\"y\n", csv.ErrQuote},
		{"a\n\xff\n", input.ErrInvalidUTF8},
		{"\xff\n1\n", input.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		for _, err := range input.CSV(strings.NewReader(tt.input), "") {
			if !errors.Is(err, tt.want) {
				t.Errorf("CSV(%q) error = %v, want it to wrap %v", tt.input, err, tt.want)
			}
		}
	}
}

func TestCSVRowsAreIndependent(t *testing.T) {
	t.Parallel()
	var rows []job.Input
	for in, err := range input.CSV(strings.NewReader("a\n1\n2\n"), "") {
		if err != nil {
			t.Fatalf("CSV yielded error %v", err)
		}
		rows = append(rows, in)
	}
	want := []job.Input{{"a": "1"}, {"a": "2"}}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("CSV rows kept after the loop mismatch (-want +got):\n%s", diff)
	}
}

func TestCSVReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	tests := []struct {
		name string
		r    io.Reader
		want []row
	}{
		{"in header", iotest.ErrReader(boom), []row{{Line: 1, Err: "in.csv:1: read: disk on fire"}}},
		{
			"after a record",
			io.MultiReader(strings.NewReader("a\n1\n"), iotest.ErrReader(boom)),
			[]row{{In: job.Input{"a": "1"}}, {Line: 3, Err: "in.csv:3: read: disk on fire"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := collect(t, input.CSV(tt.r, "in.csv"), boom)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CSV mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCSVEarlyBreak(t *testing.T) {
	t.Parallel()
	n := 0
	for range input.CSV(strings.NewReader("a\n1\n2\n3\n"), "") {
		n++
		break
	}
	if n != 1 {
		t.Errorf("CSV loop ran %d times after break, want 1", n)
	}
}
