package jobrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool"
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
	r.inPath = inPath
	task := cj.Def.Task
	for _, m := range cj.Def.Media { // their placeholders need fields too
		task += "\n" + m.Ref
	}
	return CheckPlaceholders(jobPath, task, inPath)
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
	format = format.WithTypes(r.inputTypes())
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
	csv    bool                                      // the format is CSV: WithTypes applies
}

// WithTypes returns f reading a CSV file's columns named in types as
// values of the JSON types given there, where a cell is unambiguously one
// ([input.TypedCSV]); other formats carry their own types and are
// returned as they are, as is f for an empty types.
func (f InputFormat) WithTypes(types map[string]string) InputFormat {
	if !f.csv || len(types) == 0 {
		return f
	}
	f.Decode = func(r io.Reader, source string) batchagent.Inputs { return input.TypedCSV(r, source, types) }
	return f
}

// inputTypes returns the types a CSV input's columns are read with: see
// [InputTypes].
func (r *Run) inputTypes() map[string]string {
	if r.tools == nil {
		return nil
	}
	return InputTypes(r.tools.Tools)
}

// InputTypes returns the JSON types that a CSV input's values take, by
// column name, from what the job's tools declare: a column is typed
// "integer", "number" or "boolean" when a tool's parameters schema has a
// top-level property of the column's name with that type (a single type,
// or that type and "null"), and no tool declares a property of that name
// with another type (nor without one). Every other column stays a string,
// as CSV cells are read without a declared expectation. So a CSV column
// order_id is read as an integer ("007" is 7) only when some tool takes
// order_id as an integer and none takes it as anything else.
func InputTypes(tools []tool.Tool) map[string]string {
	declared := map[string]string{} // "" where tools disagree or declare no scalar type
	for _, t := range tools {
		var params struct {
			Properties map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.Spec().Parameters, &params) != nil {
			continue
		}
		for name, p := range params.Properties {
			typ := scalarType(p.Type)
			if prev, ok := declared[name]; ok && prev != typ {
				typ = ""
			}
			declared[name] = typ
		}
	}
	types := map[string]string{}
	for name, typ := range declared {
		if typ != "" {
			types[name] = typ
		}
	}
	return types
}

// scalarType returns "integer", "number" or "boolean" where the JSON
// Schema "type" t is that type alone or with "null", else "".
func scalarType(t json.RawMessage) string {
	var types []string
	var one string
	if json.Unmarshal(t, &one) == nil {
		types = []string{one}
	} else if json.Unmarshal(t, &types) != nil {
		return ""
	}
	types = slices.DeleteFunc(types, func(s string) bool { return s == "null" })
	if len(types) != 1 {
		return ""
	}
	switch types[0] {
	case "integer", "number", "boolean":
		return types[0]
	}
	return ""
}

// InputFormatOf chooses the format of the input file at path by its
// extension: .jsonl or .ndjson (JSON Lines), .csv (a header row, then one
// input per record), .json (one JSON array of objects, read element by
// element).
func InputFormatOf(path string) (InputFormat, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return InputFormat{Decode: batchagent.JSONL, Count: input.CountJSONL}, nil
	case ".csv":
		return InputFormat{Decode: batchagent.CSV, Count: input.CountCSV, csv: true}, nil
	case ".json":
		return InputFormat{Decode: input.JSONArray, Count: input.CountJSONArray}, nil
	}
	return InputFormat{}, fmt.Errorf("inputs %s: unknown format: want a .jsonl or .csv file, or a .json file holding one array of objects", path)
}
