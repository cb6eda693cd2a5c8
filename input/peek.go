package input

import (
	"errors"
	"io"
	"iter"
	"maps"
	"slices"

	"github.com/batchagent/batchagent/job"
)

// CSVHeader reads the header row of a CSV input, as [CSV] does (a byte
// order mark and blank lines before it are skipped), and returns its names
// in column order. It reads r only as far as the header, through a buffer,
// so r should be reopened or rewound before it is read again. A header that
// [CSV] would refuse (an empty input, invalid CSV or UTF-8, an empty or
// repeated name), and a read error of r, give the *[Error] that CSV would
// yield.
func CSVHeader(r io.Reader, source string) ([]string, error) {
	rs, err := newRecords(r)
	if err != nil {
		return nil, withSource(err, source)
	}
	return rs.header, nil
}

// JSONLFields returns the keys, sorted, of the first row of a JSONL input
// that [JSONL] yields without an error: the fields the input provides, as
// [CSVHeader] returns them for CSV. Rows are free to differ, so this is what
// the first row holds, not a promise about the others. It returns a
// non-nil slice. It reads r only as far as that row (to its end when no row
// decodes), through a buffer, so r should be reopened or rewound before it
// is read again. If no row decodes, it returns the first *[Error] JSONL
// yields, or an *Error for line 1 when the input holds no row at all.
func JSONLFields(r io.Reader, source string) ([]string, error) {
	return firstFields(JSONL(r, source), source)
}

// firstFields returns the sorted keys of the first row rows yields without
// an error, else the first error, else an *Error for line 1.
func firstFields(rows iter.Seq2[job.Input, error], source string) ([]string, error) {
	var first error
	for in, err := range rows {
		if err == nil {
			keys := slices.AppendSeq(make([]string, 0, len(in)), maps.Keys(in))
			slices.Sort(keys)
			return keys, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = &Error{Source: source, Line: 1, Err: errNoRow}
	}
	return nil, first
}

// errNoRow is the error of [JSONLFields] for an input without rows.
var errNoRow = errors.New("empty input: no JSON object")
