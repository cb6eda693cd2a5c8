package jobrun

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/internal/config"
)

// inputsPathOf returns the path of the run's inputs: the --inputs flag's
// file, else the job file's; "" for none.
func inputsPathOf(cj *config.Job, flag string) string {
	if flag != "" {
		return flag
	}
	return cj.Inputs
}

// openJobInputs opens the run's inputs at inPath (see inputsPathOf) and
// checks that they have the fields the task's placeholders name. Errors
// name the job file at jobPath.
func (r *Run) openJobInputs(jobPath string, cj *config.Job, inPath string) error {
	if inPath == "" {
		return fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", jobPath)
	}
	var err error
	if r.inputs, r.total, err = r.openInputs(inPath); err != nil {
		return err
	}
	return CheckPlaceholders(jobPath, cj.Def.Task, inPath)
}

// openInputs opens an input file, choosing the format by its extension,
// and counts its inputs for the progress estimate.
func (r *Run) openInputs(path string) (batchagent.Inputs, int, error) {
	format, err := InputFormatOf(path)
	if err != nil {
		return nil, 0, err
	}
	in, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	r.closers = append(r.closers, namedCloser{"inputs", in})
	total, err := format.Count(in)
	if err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	return format.Decode(in, filepath.Base(path)), total, nil
}

// InputFormat is how an input file is read.
type InputFormat struct {
	Decode func(io.Reader, string) batchagent.Inputs // the inputs of a reader, named for errors
	Count  func(io.Reader) (int, error)              // how many inputs a reader holds
}

// InputFormatOf chooses the format of the input file at path by its
// extension.
func InputFormatOf(path string) (InputFormat, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return InputFormat{batchagent.JSONL, input.CountJSONL}, nil
	case ".csv":
		return InputFormat{batchagent.CSV, input.CountCSV}, nil
	}
	return InputFormat{}, fmt.Errorf("inputs %s: unknown format: want a .jsonl or .csv file", path)
}
