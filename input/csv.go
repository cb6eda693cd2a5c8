package job

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"
	"unicode/utf8"
)

// CSV reads r as CSV (RFC 4180, as encoding/csv parses it): a header row
// naming the fields, then one [Input] per record with string values, read
// lazily as the sequence is consumed. Quoted fields may hold commas, quotes
// ("") and newlines. Empty lines are skipped. A UTF-8 byte order mark at the
// start of the input is tolerated.
//
// A record with a different number of fields than the header, or one that
// does not parse (a bare quote, say), yields (nil, *[InputError]) naming
// source and the line the record starts on, and reading goes on with the next
// record when the input allows it (an unterminated quote runs to the end of
// the input). The error wraps [csv.ErrFieldCount], [csv.ErrBareQuote] or
// [csv.ErrQuote]. So does a record with a field that is not valid UTF-8: its
// error wraps [ErrInvalidUTF8] and names the column and its header name, and
// the record is not yielded with U+FFFD in place of the bad bytes.
//
// An empty input, or a header that does not parse, is not valid UTF-8 or has
// an empty or repeated name, yields one *InputError and ends the sequence, as does a
// read error of r. Since csv.Reader reads ahead, the Line of a read error is
// only an estimate: the line after the last record returned.
//
// The caller may stop the loop early. The sequence reads r as it goes and is
// meant to be iterated once. It does not close r.
func CSV(r io.Reader, source string) iter.Seq2[Input, error] {
	return func(yield func(Input, error) bool) {
		br := bufio.NewReader(r)
		if err := skipBOM(br); err != nil {
			err.Source = source
			yield(nil, err)
			return
		}
		cr := csv.NewReader(br)
		cr.FieldsPerRecord = -1 // counts are checked here, against the header
		cr.ReuseRecord = true

		header, err := readHeader(cr)
		if err != nil {
			err.Source = source
			yield(nil, err)
			return
		}
		last := 1 // line of the last record read
		for {
			rec, err := cr.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var pe *csv.ParseError
				if !errors.As(err, &pe) {
					yield(nil, &InputError{Source: source, Line: last + 1, Err: fmt.Errorf("read: %w", err)})
					return
				}
				last = pe.Line
				if !yield(nil, &InputError{Source: source, Line: pe.StartLine, Err: parseError(pe)}) {
					return
				}
				continue
			}
			line, _ := cr.FieldPos(0)
			last = line
			if len(rec) != len(header) {
				err := fmt.Errorf("%w: got %d, header has %d", csv.ErrFieldCount, len(rec), len(header))
				if !yield(nil, &InputError{Source: source, Line: line, Err: err}) {
					return
				}
				continue
			}
			if i := invalidField(rec); i >= 0 {
				err := fmt.Errorf("%w in column %d (%q)", ErrInvalidUTF8, i+1, header[i])
				if !yield(nil, &InputError{Source: source, Line: line, Err: err}) {
					return
				}
				continue
			}
			in := make(Input, len(header))
			for i, name := range header {
				in[name] = rec[i]
			}
			if !yield(in, nil) {
				return
			}
		}
	}
}

// skipBOM skips a byte order mark at the start of br. A read error is
// returned, not left to the reads that follow: Peek clears it in br, so
// that the next read could see only the end of the input and report the
// input as empty.
func skipBOM(br *bufio.Reader) *InputError {
	b, err := br.Peek(len(utf8BOM))
	if bytes.Equal(b, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM)) // cannot fail: the bytes were just peeked
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return &InputError{Line: 1, Err: fmt.Errorf("read: %w", err)}
	}
	return nil
}

// readHeader reads and checks the header row. The returned error lacks its
// Source.
func readHeader(cr *csv.Reader) ([]string, *InputError) {
	rec, err := cr.Read()
	if err != nil {
		var pe *csv.ParseError
		switch {
		case errors.Is(err, io.EOF):
			return nil, &InputError{Line: 1, Err: errors.New("empty input: no CSV header")}
		case errors.As(err, &pe):
			return nil, &InputError{Line: pe.StartLine, Err: fmt.Errorf("header: %w", parseError(pe))}
		default:
			return nil, &InputError{Line: 1, Err: fmt.Errorf("read: %w", err)}
		}
	}
	line, _ := cr.FieldPos(0)
	header := make([]string, len(rec)) // rec is reused by the next Read
	seen := make(map[string]int, len(rec))
	if i := invalidField(rec); i >= 0 {
		return nil, &InputError{Line: line, Err: fmt.Errorf("header: %w in column %d", ErrInvalidUTF8, i+1)}
	}
	for i, name := range rec {
		if name == "" {
			return nil, &InputError{Line: line, Err: fmt.Errorf("header: column %d has an empty name", i+1)}
		}
		if j, dup := seen[name]; dup {
			return nil, &InputError{Line: line,
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

// parseError restates pe without its own "line N" prefix, which InputError
// supplies, keeping the column and wrapping pe.Err.
func parseError(pe *csv.ParseError) error {
	if pe.Line != pe.StartLine {
		return fmt.Errorf("invalid CSV at line %d, column %d: %w", pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("invalid CSV at column %d: %w", pe.Column, pe.Err)
}
