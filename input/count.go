package input

import (
	"errors"
	"io"
)

// CountJSONL returns the number of items [JSONL] yields for r, rows and
// errors alike, without decoding them: the lines that hold more than blank
// bytes. It reads r to its end through a fixed buffer, so r should be
// rewound before it is read again. A read error of r is returned as it is,
// with the items counted before it.
func CountJSONL(r io.Reader) (int, error) {
	lr := newLineReader(r, false)
	n := 0
	for {
		_, err := lr.next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// CountCSV returns the number of items [CSV] yields for r, rows and errors
// alike, without building the rows: one per record after the header, a
// record that is no valid row included, or one for an input whose header is
// refused. It reads r to its end, so r should be rewound before it is read
// again. A read error of r is returned as it is, with the items counted
// before it.
func CountCSV(r io.Reader) (int, error) {
	rs, err := newRecords(r)
	if err != nil {
		if re, ok := err.(*readError); ok {
			return 0, re.err
		}
		return 1, nil // the header's error ends the sequence
	}
	n := 0
	for {
		_, err := rs.next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if re, ok := err.(*readError); ok {
			return n, re.err
		}
		n++
	}
}

// LineJSONL returns the 1-based line of item i (0-based) of those [JSONL]
// yields for r, rows and errors alike, or 0 when it yields fewer. It reads
// r only as far as that line, through a buffer. A read error of r is
// returned as it is.
func LineJSONL(r io.Reader, i int) (int, error) {
	lr := newLineReader(r, false)
	for n := 0; ; n++ {
		_, err := lr.next()
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if n == i {
			return lr.line, nil
		}
	}
}

// LineCSV returns the 1-based line that item i (0-based) of those [CSV]
// yields for r starts on, rows and errors alike, or 0 when it yields fewer.
// It reads r only as far as that record, through a buffer. A read error of
// r is returned as it is.
func LineCSV(r io.Reader, i int) (int, error) {
	rs, err := newRecords(r)
	if err != nil {
		if re, ok := err.(*readError); ok {
			return 0, re.err
		}
		if i == 0 {
			return err.(*Error).Line, nil
		}
		return 0, nil
	}
	for n := 0; ; n++ {
		_, err := rs.next()
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		if re, ok := err.(*readError); ok {
			return 0, re.err
		}
		if n == i {
			return rs.line, nil
		}
	}
}
