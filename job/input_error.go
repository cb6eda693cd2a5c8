package job

import "strconv"

// InputError reports an input row that could not be read or decoded. Other
// rows are unaffected: the sequences of package input yield an InputError
// in place of the bad row and, where the input allows, go on with the next
// one.
type InputError struct {
	Source string // file name, or "" (then omitted from the message)
	Line   int    // 1-based line; for CSV, the line the record starts on
	Err    error  // what went wrong
}

// Error returns e.g. "inputs.jsonl:3: invalid JSON: unexpected end of JSON
// input", or "line 3: ..." when Source is empty.
func (e *InputError) Error() string {
	if e.Source == "" {
		return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
	}
	return e.Source + ":" + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *InputError) Unwrap() error { return e.Err }
