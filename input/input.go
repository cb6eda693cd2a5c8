package input

import (
	"iter"
	"strconv"

	"github.com/batchagent/batchagent/job"
)

// Error reports an input row that could not be read or decoded. Other rows
// are unaffected: the sequences in this package yield an Error in place of
// the bad row and, where the input allows, go on with the next one.
type Error struct {
	Source string // file name, or "" (then omitted from the message)
	Line   int    // 1-based line; for CSV, the line the record starts on
	Err    error  // what went wrong
}

// Error returns e.g. "inputs.jsonl:3: invalid JSON: unexpected end of JSON
// input", or "line 3: ..." when Source is empty.
func (e *Error) Error() string {
	if e.Source == "" {
		return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
	}
	return e.Source + ":" + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Slice adapts in to the sequence shape of [JSONL] and [CSV]. It never yields
// an error. The slice is not copied: the caller must not modify it while the
// sequence is being consumed. The sequence may be iterated more than once.
func Slice(in []job.Input) iter.Seq2[job.Input, error] {
	return func(yield func(job.Input, error) bool) {
		for _, x := range in {
			if !yield(x, nil) {
				return
			}
		}
	}
}
