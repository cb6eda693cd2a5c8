package jobrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/input"
)

// TestLineTable: the table gives every input's line as input.LineJSONL and
// input.LineCSV do one at a time, from one read of the file, and a
// regular file of 1,000 inputs costs it one run, not 1,000 lines.
func TestLineTable(t *testing.T) {
	dir := t.TempDir()
	var regular strings.Builder
	regular.WriteString("title,photo\n")
	for i := range 1000 {
		fmt.Fprintf(&regular, "t%d,p%d.png\n", i, i)
	}
	for _, c := range []struct {
		name, body string
		one        func(f *os.File, i int) (int, error)
		runs       int
	}{
		{"regular.csv", regular.String(), func(f *os.File, i int) (int, error) { return input.LineCSV(f, i) }, 1},
		{"irregular.csv", "title,photo\na,1.png\n\"two\nlines\",2.png\nc,3.png\n", func(f *os.File, i int) (int, error) { return input.LineCSV(f, i) }, 2},
		{"blank.jsonl", "{\"p\":1}\n\n{\"p\":2}\n{\"p\":3}\n\n\n{\"p\":4}\n", func(f *os.File, i int) (int, error) { return input.LineJSONL(f, i) }, 3},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		lt := newLineTable(path)
		for i := 0; ; i++ {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.one(f, i)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got := lt.line(i); got != want {
				t.Errorf("%s: input %d on line %d, want %d", c.name, i, got, want)
			}
			if want == 0 {
				break
			}
		}
		if len(lt.runs) != c.runs {
			t.Errorf("%s: %d runs, want %d", c.name, len(lt.runs), c.runs)
		}
	}
	if newLineTable("") != nil || withInputLine(nil, nil, 0) != nil {
		t.Error("no inputs file: want no table and errors as they are")
	}
}
