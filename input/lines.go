package input

import (
	"errors"
	"io"
	"iter"
)

// Format names an input file's format for [Lines].
type Format int

// The input formats.
const (
	FormatJSONL     Format = iota // one JSON object a line ([JSONL])
	FormatCSV                     // a header and records ([CSV])
	FormatJSONArray               // one JSON array of objects ([JSONArray])
)

// Lines yields, in one pass over r, the 1-based line each item that the
// format's sequence yields for r starts on, rows and errors alike, in
// order: item i's line is the i-th value. It stops at the end of the
// items; a read error of r is yielded once, as it is, and ends it. It is
// [LineJSONL], [LineCSV] and [LineJSONArray] for every item at once.
func Lines(r io.Reader, f Format) iter.Seq2[int, error] {
	switch f {
	case FormatCSV:
		return linesCSV(r)
	case FormatJSONArray:
		return linesJSONArray(r)
	}
	return linesJSONL(r)
}

func linesJSONL(r io.Reader) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		lr := newLineReader(r, false)
		for {
			_, err := lr.next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(0, err)
				return
			}
			if !yield(lr.line, nil) {
				return
			}
		}
	}
}

func linesCSV(r io.Reader) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		rs, err := newRecords(r)
		if err != nil {
			if re, ok := err.(*readError); ok {
				yield(0, re.err)
				return
			}
			// A bad header is the one item CSV yields.
			yield(err.(*Error).Line, nil)
			return
		}
		for {
			_, err := rs.next()
			if errors.Is(err, io.EOF) {
				return
			}
			if re, ok := err.(*readError); ok {
				yield(0, re.err)
				return
			}
			if !yield(rs.line, nil) {
				return
			}
		}
	}
}

func linesJSONArray(r io.Reader) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		lc := newLineCounter(r)
		for _, err := range elementsOf(lc, "", false) {
			line := lc.lastLine
			if ae, ok := errors.AsType[*arrayReadError](err); ok {
				yield(0, ae.err)
				return
			}
			if ie, ok := errors.AsType[*Error](err); ok {
				line = ie.Line
			}
			if !yield(line, nil) {
				return
			}
		}
	}
}
