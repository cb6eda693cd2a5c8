package input_test

import (
	"bytes"
	"errors"
	"io"
	"iter"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// countSeeds are inputs on the edges of the row rules: byte order marks,
// blank and CRLF lines, multi-line and broken CSV records, bad headers.
var countSeeds = []string{
	"",
	"\n",
	"\xEF\xBB\xBF",
	"\xEF\xBB\xBF\n",
	"\xEF\xBB\xBF{}\n",
	"\xEF\xBB",
	" \t\r\n\r\n",
	`{"a":1}`,
	"{\"a\":1}\n{\"b\":\"x\"}\n",
	"{\"a\":\n\n  \n{\"b\":2}\r\n",
	"[1,2]\n3\nnull\n\"s\"\n",
	"x\n\xEF\xBB\xBF\n",
	"\v\n\f\n",
	"a\n",
	"a,b\n1,2\n",
	"\xEF\xBB\xBFa\n1\n",
	"a,a\n1,2\n",
	"a,a\n1,2\n3,4\n",
	"a,\n1,2\n",
	"a,\xff\n1,2\n",
	"\"a\nb\n",
	"a,b\n1\n1,2,3\n",
	"a\n\"x\ny\"\n2\n",
	"a\nx\"y\n2\n",
	"a\n\"x\n",
	"a\n\xff\n2\n",
	"a\r\n\r\n1\r\n\r\n",
	"\n\na\n\n1\n\n",
}

// items counts what seq yields and returns, for each item, the line of its
// *input.Error (0 for a row).
func items(t *testing.T, seq iter.Seq2[job.Input, error]) []int {
	t.Helper()
	var lines []int
	for _, err := range seq {
		line := 0
		if err != nil {
			ie, ok := errors.AsType[*input.Error](err)
			if !ok {
				t.Fatalf("sequence yielded %v, want an *input.Error", err)
			}
			line = ie.Line
		}
		lines = append(lines, line)
	}
	return lines
}

// checkCount checks that count and lineOf agree with the items read yields
// for data: as many items, and each error item on the line lineOf gives.
func checkCount(t *testing.T, name string, data []byte,
	read func(io.Reader, string) iter.Seq2[job.Input, error],
	count func(io.Reader) (int, error), lineOf func(io.Reader, int) (int, error)) {
	t.Helper()
	lines := items(t, read(bytes.NewReader(data), ""))
	n, err := count(bytes.NewReader(data))
	if err != nil || n != len(lines) {
		t.Fatalf("Count%s(%q) = %d, %v; want %d, the items %s yields", name, data, n, err, len(lines), name)
	}
	for i, want := range lines {
		got, err := lineOf(bytes.NewReader(data), i)
		if err != nil || got < 1 || want != 0 && got != want {
			t.Fatalf("Line%s(%q, %d) = %d, %v; want the line of item %d (error line %d)", name, data, i, got, err, i, want)
		}
		if i > 0 {
			prev, _ := lineOf(bytes.NewReader(data), i-1)
			if got <= prev {
				t.Fatalf("Line%s(%q, %d) = %d, not after item %d's line %d", name, data, i, got, i-1, prev)
			}
		}
	}
	if got, err := lineOf(bytes.NewReader(data), len(lines)); got != 0 || err != nil {
		t.Fatalf("Line%s(%q, %d) = %d, %v; want 0, nil past the last item", name, data, len(lines), got, err)
	}
}

// FuzzCount checks that CountJSONL and CountCSV give, for any bytes, the
// number of items JSONL and CSV yield, and LineJSONL and LineCSV the lines
// of those items: one set of row rules for reading and counting.
func FuzzCount(f *testing.F) {
	for _, s := range countSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCount(t, "JSONL", data, input.JSONL, input.CountJSONL, input.LineJSONL)
		checkCount(t, "CSV", data, input.CSV, input.CountCSV, input.LineCSV)
	})
}

func TestCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		data      string
		jsonl     int
		csv       int
		lineJSONL []int // line of each JSONL item
		lineCSV   []int // line each CSV item starts on
	}{
		{"empty", "", 0, 1, nil, []int{1}},
		{"BOM only", "\xEF\xBB\xBF", 0, 1, nil, []int{1}},
		{"blank and CRLF lines", "\xEF\xBB\xBFa\r\n\r\n\r\n1\r\n\r\n2", 3, 2, []int{1, 4, 6}, []int{4, 6}},
		{"quoted newlines", "a\n\"x\n\ny\"\n2\n", 4, 2, []int{1, 2, 4, 5}, []int{2, 5}},
		{"bad header counts once", "a,a\n1,2\n3,4\n", 3, 1, []int{1, 2, 3}, []int{1}},
		{"broken records count", "a,b\n1\n\"x\n", 3, 2, []int{1, 2, 3}, []int{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if n, err := input.CountJSONL(strings.NewReader(tt.data)); n != tt.jsonl || err != nil {
				t.Errorf("CountJSONL(%q) = %d, %v; want %d, nil", tt.data, n, err, tt.jsonl)
			}
			if n, err := input.CountCSV(strings.NewReader(tt.data)); n != tt.csv || err != nil {
				t.Errorf("CountCSV(%q) = %d, %v; want %d, nil", tt.data, n, err, tt.csv)
			}
			for i, want := range tt.lineJSONL {
				if got, err := input.LineJSONL(strings.NewReader(tt.data), i); got != want || err != nil {
					t.Errorf("LineJSONL(%q, %d) = %d, %v; want %d, nil", tt.data, i, got, err, want)
				}
			}
			for i, want := range tt.lineCSV {
				if got, err := input.LineCSV(strings.NewReader(tt.data), i); got != want || err != nil {
					t.Errorf("LineCSV(%q, %d) = %d, %v; want %d, nil", tt.data, i, got, err, want)
				}
			}
		})
	}
}

// TestCountLongLine counts a JSONL line far longer than any buffer, blank
// or not, as JSONL reads it.
func TestCountLongLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat(" ", 3<<20)
	data := "\xEF\xBB\xBF" + long + "\n" + long + "x" + long + "\n{}" + long
	if n, err := input.CountJSONL(strings.NewReader(data)); n != 2 || err != nil {
		t.Errorf("CountJSONL(3 MiB lines) = %d, %v; want 2, nil", n, err)
	}
	if got := len(items(t, input.JSONL(strings.NewReader(data), ""))); got != 2 {
		t.Errorf("JSONL(3 MiB lines) yielded %d items, want 2", got)
	}
	if line, err := input.LineJSONL(strings.NewReader(data), 1); line != 3 || err != nil {
		t.Errorf("LineJSONL(3 MiB lines, 1) = %d, %v; want 3, nil", line, err)
	}
}

// TestCountReadError returns a read error of the input as it is, for
// both formats, wherever it falls.
func TestCountReadError(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("disk gone")
	for _, data := range []string{"", "a\n", "a\n1\n2\n"} {
		r := func() io.Reader { return io.MultiReader(strings.NewReader(data), iotest.ErrReader(errDisk)) }
		if _, err := input.CountJSONL(r()); !errors.Is(err, errDisk) {
			t.Errorf("CountJSONL(%q then a read error) error = %v, want %v", data, err, errDisk)
		}
		if _, err := input.CountCSV(r()); !errors.Is(err, errDisk) {
			t.Errorf("CountCSV(%q then a read error) error = %v, want %v", data, err, errDisk)
		}
	}
}
