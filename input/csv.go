package input

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/batchagent/batchagent/job"
)

// CSV reads r as CSV (RFC 4180, as encoding/csv parses it): a header row
// naming the fields, then one [job.Input] per record with string values, read
// lazily as the sequence is consumed. Quoted fields may hold commas, quotes
// ("") and newlines. Empty lines are skipped. A UTF-8 byte order mark at the
// start of the input is tolerated.
//
// A record with a different number of fields than the header, or one that
// does not parse (a bare quote, say), yields (nil, *[Error]) naming
// source and the line the record starts on, and reading goes on with the next
// record when the input allows it (an unterminated quote runs to the end of
// the input). The error wraps [csv.ErrFieldCount], [csv.ErrBareQuote] or
// [csv.ErrQuote]. So does a record with a field that is not valid UTF-8: its
// error wraps [ErrInvalidUTF8] and names the column and its header name, and
// the record is not yielded with U+FFFD in place of the bad bytes.
//
// An empty input, or a header that does not parse, is not valid UTF-8 or has
// an empty or repeated name, yields one *Error and ends the sequence, as does a
// read error of r. Since csv.Reader reads ahead, the Line of a read error is
// only an estimate: the line after the last record returned.
//
// The caller may stop the loop early. The sequence reads r as it goes and is
// meant to be iterated once. It does not close r.
func CSV(r io.Reader, source string) iter.Seq2[job.Input, error] {
	return TypedCSV(r, source, nil)
}

// TypedCSV reads r as [CSV] does, but gives the values of the columns
// named in types the JSON type given there, where the cell's text is
// unambiguously a value of that type; every other cell stays a string.
// The rule, applied to the cell's text exactly (no trimming):
//
//   - "integer": a decimal integer that fits in 64 bits, with an optional
//     sign ("007" becomes 7, "-3" becomes -3), as a json.Number; "7.0",
//     "1e3" and "" stay strings.
//   - "number": a JSON number ("2.5", "-1e3"), or a decimal that is one
//     but for leading zeros or a leading "+", as a json.Number of its
//     value; "NaN", "Inf", "0x1F" and "" stay strings.
//   - "boolean": "true" or "false" in any case, as a bool; "1", "yes" and
//     "" stay strings.
//
// Other types in types are ignored. A nil or empty types reads as [CSV]
// does. The map is read, not kept past the sequence, and must not change
// while the sequence runs.
func TypedCSV(r io.Reader, source string, types map[string]string) iter.Seq2[job.Input, error] {
	return func(yield func(job.Input, error) bool) {
		rs, err := newRecords(r)
		if err != nil {
			yield(nil, withSource(err, source))
			return
		}
		for {
			rec, err := rs.next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if !yield(nil, withSource(err, source)) {
					return
				}
				if _, row := err.(*Error); !row {
					return
				}
				continue
			}
			in := make(job.Input, len(rs.header))
			for i, name := range rs.header {
				in[name] = rec[i]
				if t, ok := types[name]; ok {
					if v, ok := typed(rec[i], t); ok {
						in[name] = v
					}
				}
			}
			if !yield(in, nil) {
				return
			}
		}
	}
}

// records reads the records of a CSV input. It is the one place where the
// rules of what a row is live, shared by [CSV], [CountCSV] and [CSVHeader]:
// a UTF-8 byte order mark at the start is skipped, the first record is the
// header, empty lines hold no record, and every record after the header is
// one row, whether it is valid or not (a quoted field may span lines). It is
// owned by one caller and not safe for concurrent use.
type records struct {
	cr     *csv.Reader
	header []string // field names, in column order
	last   int      // line of the last record read
	line   int      // line the last record read starts on
}

// newRecords reads the header of the CSV input r. A header that is no
// valid header gives an *Error without its Source; a read error of r gives
// a *readError.
func newRecords(r io.Reader) (*records, error) {
	br := bufio.NewReader(r)
	if err := skipBOM(br); err != nil {
		return nil, &readError{line: 1, err: err}
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // counts are checked here, against the header
	cr.ReuseRecord = true
	header, err := readHeader(cr)
	if err != nil {
		return nil, err
	}
	return &records{cr: cr, header: header, last: 1}, nil
}

// next reads the next record, which is valid until the next call. A record that is no valid row
// gives an *Error without its Source; the records after it can still be
// read. Either way rs.line is then the line the record starts on. At the
// end of the input next returns io.EOF; a read error of the
// input gives a *readError, and ends it.
func (rs *records) next() ([]string, error) {
	rec, err := rs.cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if !errors.As(err, &pe) {
			return nil, &readError{line: rs.last + 1, err: err}
		}
		rs.last, rs.line = pe.Line, pe.StartLine
		return nil, &Error{Line: pe.StartLine, Err: parseError(pe)}
	}
	line, _ := rs.cr.FieldPos(0)
	rs.last, rs.line = line, line
	if len(rec) != len(rs.header) {
		err := fmt.Errorf("%w: got %d, header has %d", csv.ErrFieldCount, len(rec), len(rs.header))
		return nil, &Error{Line: line, Err: err}
	}
	if i := invalidField(rec); i >= 0 {
		err := fmt.Errorf("%w in column %d (%q)", ErrInvalidUTF8, i+1, rs.header[i])
		return nil, &Error{Line: line, Err: err}
	}
	return rec, nil
}

// readError is a read error of an input, met on line. It ends the input.
type readError struct {
	line int
	err  error
}

func (e *readError) Error() string { return "read: " + e.err.Error() }

// withSource returns err, a *readError or an *Error without its Source, as
// the *Error that a sequence yields.
func withSource(err error, source string) *Error {
	if re, ok := err.(*readError); ok {
		return &Error{Source: source, Line: re.line, Err: fmt.Errorf("read: %w", re.err)}
	}
	e := err.(*Error)
	e.Source = source
	return e
}

// skipBOM skips a byte order mark at the start of br. A read error is
// returned, not left to the reads that follow: Peek clears it in br, so
// that the next read could see only the end of the input and report the
// input as empty.
func skipBOM(br *bufio.Reader) error {
	b, err := br.Peek(len(utf8BOM))
	if bytes.Equal(b, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM)) // cannot fail: the bytes were just peeked
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// readHeader reads and checks the header row. A header that is no valid
// header gives an *Error without its Source; a read error gives a
// *readError.
func readHeader(cr *csv.Reader) ([]string, error) {
	rec, err := cr.Read()
	if err != nil {
		var pe *csv.ParseError
		switch {
		case errors.Is(err, io.EOF):
			return nil, &Error{Line: 1, Err: errors.New("empty input: no CSV header")}
		case errors.As(err, &pe):
			return nil, &Error{Line: pe.StartLine, Err: fmt.Errorf("header: %w", parseError(pe))}
		default:
			return nil, &readError{line: 1, err: err}
		}
	}
	line, _ := cr.FieldPos(0)
	header := make([]string, len(rec)) // rec is reused by the next Read
	seen := make(map[string]int, len(rec))
	if i := invalidField(rec); i >= 0 {
		return nil, &Error{Line: line, Err: fmt.Errorf("header: %w in column %d", ErrInvalidUTF8, i+1)}
	}
	for i, name := range rec {
		if name == "" {
			return nil, &Error{Line: line, Err: fmt.Errorf("header: column %d has an empty name", i+1)}
		}
		if j, dup := seen[name]; dup {
			return nil, &Error{Line: line,
				Err: fmt.Errorf("header: duplicate name %q in columns %d and %d", name, j+1, i+1)}
		}
		seen[name] = i
		header[i] = name
	}
	return header, nil
}

// invalidField returns the index of the first field of rec that is not
// valid UTF-8, or -1.
func invalidField(rec []string) int {
	for i, f := range rec {
		if !utf8.ValidString(f) {
			return i
		}
	}
	return -1
}

// parseError restates pe without its own "line N" prefix, which Error
// supplies, keeping the column and wrapping pe.Err.
func parseError(pe *csv.ParseError) error {
	if pe.Line != pe.StartLine {
		return fmt.Errorf("invalid CSV at line %d, column %d: %w", pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("invalid CSV at column %d: %w", pe.Column, pe.Err)
}

// typed returns the value of the CSV cell s as a JSON value of type t (see
// [TypedCSV]) and true, or false where s is not unambiguously one.
func typed(s, t string) (any, bool) {
	switch t {
	case "integer":
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, false
		}
		return json.Number(strconv.FormatInt(i, 10)), true
	case "number":
		if s == "" || strings.ContainsAny(s, "xXpP_") {
			return nil, false
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		if json.Valid([]byte(s)) {
			return json.Number(s), true
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
	case "boolean":
		switch strings.ToLower(s) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return nil, false
}
