package jobrun

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// withInputLine returns err, the error of input i of the inputs file at
// inPath, naming the input's line when it is a media item that could not
// be loaded (`inputs.csv:4: field "photo": …`); other errors, and every
// error when the line cannot be found, are returned as they are. It reads
// the file up to the input's line: only failed media loads pay for it.
func withInputLine(err error, inPath string, i int) error {
	ae, ok := errors.AsType[*job.AgentError](err)
	if !ok || inPath == "" {
		return err
	}
	if _, ok := errors.AsType[*job.MediaError](ae.Err); !ok {
		return err
	}
	if _, ok := errors.AsType[*job.InputError](ae.Err); ok {
		return err
	}
	line := lineOf(inPath, i)
	if line == 0 {
		return err
	}
	named := *ae // the engine's value may be shared with the checkpoint
	named.Err = &job.InputError{Source: filepath.Base(inPath), Line: line, Err: ae.Err}
	return &named
}

// lineOf returns the 1-based line of input i of the file at path (CSV,
// .json array or JSONL by its extension), or 0 when it cannot be found.
func lineOf(path string, i int) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	find := input.LineJSONL
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		find = input.LineCSV
	case ".json":
		find = input.LineJSONArray
	}
	line, err := find(f, i)
	if err != nil {
		return 0
	}
	return line
}
