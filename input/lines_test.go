package input_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/input"
)

// TestLinesMatchLine: Lines yields, in one pass, what LineJSONL, LineCSV
// and LineJSONArray return for each item, bad items and blank lines
// included.
func TestLinesMatchLine(t *testing.T) {
	for _, c := range []struct {
		name string
		f    input.Format
		in   string
		one  func(s string, i int) (int, error)
	}{
		{"jsonl", input.FormatJSONL, "{\"a\":1}\n\n  \n{\"a\":2}\nnot json\n{\"a\":3}", func(s string, i int) (int, error) { return input.LineJSONL(strings.NewReader(s), i) }},
		{"csv", input.FormatCSV, "a,b\n1,2\n\"multi\nline\",3\n4\n5,6\n", func(s string, i int) (int, error) { return input.LineCSV(strings.NewReader(s), i) }},
		{"csv bad header", input.FormatCSV, "a,a\n1,2\n", func(s string, i int) (int, error) { return input.LineCSV(strings.NewReader(s), i) }},
		{"json array", input.FormatJSONArray, "[\n {\"a\": 1},\n\n {\"a\":\n  2},\n 7,\n {\"a\": 3}\n]\n", func(s string, i int) (int, error) { return input.LineJSONArray(strings.NewReader(s), i) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			for line, err := range input.Lines(strings.NewReader(c.in), c.f) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, line)
			}
			var want []int
			for i := 0; ; i++ {
				line, err := c.one(c.in, i)
				if err != nil || line == 0 {
					break
				}
				want = append(want, line)
			}
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("Lines = %v, want %v (one at a time)", got, want)
			}
		})
	}
}
