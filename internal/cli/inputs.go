package cli

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
func (r *runner) openJobInputs(jobPath string, cj *config.Job, inPath string) error {
	if inPath == "" {
		return fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", jobPath)
	}
	var err error
	if r.inputs, r.total, err = r.openInputs(inPath); err != nil {
		return err
	}
	return checkPlaceholders(jobPath, cj.Def.Task, inPath)
}

// openInputs opens an input file, choosing the format by its extension,
// and counts its inputs for the progress estimate.
func (r *runner) openInputs(path string) (batchagent.Inputs, int, error) {
	format, err := inputFormatOf(path)
	if err != nil {
		return nil, 0, err
	}
	in, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	r.closers = append(r.closers, namedCloser{"inputs", in})
	total, err := format.count(in)
	if err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("inputs: %w", err)
	}
	return format.decode(in, filepath.Base(path)), total, nil
}

// inputFormat is how an input file is read.
type inputFormat struct {
	decode func(io.Reader, string) batchagent.Inputs
	count  func(io.Reader) (int, error)
}

// inputFormatOf chooses the format of the input file at path by its
// extension.
func inputFormatOf(path string) (inputFormat, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return inputFormat{batchagent.JSONL, input.CountJSONL}, nil
	case ".csv":
		return inputFormat{batchagent.CSV, input.CountCSV}, nil
	}
	return inputFormat{}, fmt.Errorf("inputs %s: unknown format: want a .jsonl or .csv file", path)
}
