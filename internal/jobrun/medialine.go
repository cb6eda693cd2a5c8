package jobrun

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// withInputLine returns err, the error of input i of the inputs file
// whose lines lines finds, naming the input's line when it is a media item
// that could not be loaded (`inputs.csv:4: field "photo": …`); other
// errors, and every error when the line cannot be found, are returned as
// they are.
func withInputLine(err error, lines *lineTable, i int) error {
	ae, ok := errors.AsType[*job.AgentError](err)
	if !ok || lines == nil {
		return err
	}
	if _, ok := errors.AsType[*job.MediaError](ae.Err); !ok {
		return err
	}
	if _, ok := errors.AsType[*job.InputError](ae.Err); ok {
		return err
	}
	line := lines.line(i)
	if line == 0 {
		return err
	}
	named := *ae // the engine's value may be shared with the checkpoint
	named.Err = &job.InputError{Source: filepath.Base(lines.path), Line: line, Err: ae.Err}
	return &named
}

// A lineTable finds the line of an input of an inputs file. It reads the
// file once, when first asked (only runs with failed media loads pay for
// it), and keeps the lines in runs: a run is the inputs from first on
// whose line is their index plus delta, so a file without blank lines or
// multi-line records costs one run, and memory grows only with the
// irregularities, not with the inputs. It is safe for concurrent use.
type lineTable struct {
	path string
	once sync.Once
	runs []lineRun // by first, ascending
	n    int       // the inputs found
}

type lineRun struct{ first, delta int }

// newLineTable returns the line table of the inputs file at path; nil
// when path is "" (inputs not from a file).
func newLineTable(path string) *lineTable {
	if path == "" {
		return nil
	}
	return &lineTable{path: path}
}

// line returns the 1-based line of input i, or 0 when it cannot be found.
func (t *lineTable) line(i int) int {
	t.once.Do(t.read)
	if i < 0 || i >= t.n {
		return 0
	}
	k, found := slices.BinarySearchFunc(t.runs, i, func(r lineRun, i int) int { return r.first - i })
	if !found {
		k--
	}
	return i + t.runs[k].delta
}

// read reads the file's lines into t.runs; a file that cannot be read
// leaves t empty.
func (t *lineTable) read() {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	format := input.FormatJSONL
	switch strings.ToLower(filepath.Ext(t.path)) {
	case ".csv":
		format = input.FormatCSV
	case ".json":
		format = input.FormatJSONArray
	}
	i := 0
	for line, err := range input.Lines(f, format) {
		if err != nil {
			break
		}
		if d := line - i; len(t.runs) == 0 || t.runs[len(t.runs)-1].delta != d {
			t.runs = append(t.runs, lineRun{first: i, delta: d})
		}
		i++
	}
	t.n = i
}
