package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/batchagent/batchagent/job"
)

// JSONArray reads r as one JSON array of objects (a .json file), decoded
// lazily, one element at a time, as the sequence is consumed: the array is
// never held whole. Each element is decoded as a [JSONL] line is (numbers
// as json.Number, a repeated key or text that is not UTF-8 refused), and
// leading and trailing whitespace and a UTF-8 byte order mark are
// tolerated.
//
// An element that is not an object yields (nil, *[Error]) whose Line is the
// line the element starts on and whose message names the element's
// 0-based index ("element 3: ..."), and reading goes on with the next
// element. Text that is not valid JSON, or a repeated key or invalid UTF-8
// in an element, yields one such *Error for the element where it is met
// and ends the sequence, since an array cannot be read past a syntax error;
// so does an input that is not an array, data after the array, and a read
// error of r. Every row yielded without an error is a non-nil map.
//
// The caller may stop the loop early. The sequence reads r as it goes and
// is meant to be iterated once. It does not close r.
func JSONArray(r io.Reader, source string) iter.Seq2[job.Input, error] {
	return arrayElements(r, source, true)
}

// CountJSONArray returns the number of items [JSONArray] yields for r (rows
// and errors alike) without decoding the elements into maps. It returns an
// error only when r fails to read.
func CountJSONArray(r io.Reader) (int, error) {
	n := 0
	for _, err := range arrayElements(r, "", false) {
		if _, ok := errors.AsType[*arrayReadError](err); ok {
			return n, err
		}
		n++
	}
	return n, nil
}

// JSONArrayFields returns the keys, sorted, of the first element of a JSON
// array input that [JSONArray] yields without an error, as [JSONLFields]
// does for JSON Lines, with the same contract.
func JSONArrayFields(r io.Reader, source string) ([]string, error) {
	return firstFields(JSONArray(r, source), source)
}

// LineJSONArray returns the 1-based line that element i (0-based) of a
// JSON array input starts on, reading r up to it. It returns an error when
// the input has no element i or fails to read.
func LineJSONArray(r io.Reader, i int) (int, error) {
	lc := newLineCounter(r)
	n := 0
	for _, err := range elementsOf(lc, "", false) {
		if n == i {
			if err != nil {
				if ie, ok := errors.AsType[*Error](err); ok {
					return ie.Line, nil
				}
			}
			return lc.lastLine, nil
		}
		n++
	}
	return 0, fmt.Errorf("input %d: no such element (the array has %d)", i, n)
}

// arrayReadError is a read error of the input, which [CountJSONArray]
// returns.
type arrayReadError struct{ err error }

func (e *arrayReadError) Error() string { return "read: " + e.err.Error() }
func (e *arrayReadError) Unwrap() error { return e.err }

// arrayElements is JSONArray; with decode unset the rows yielded are nil
// (elements are only checked).
func arrayElements(r io.Reader, source string, decode bool) iter.Seq2[job.Input, error] {
	return elementsOf(newLineCounter(r), source, decode)
}

// elementsOf reads the elements of the array lc reads.
func elementsOf(lc *lineCounter, source string, decode bool) iter.Seq2[job.Input, error] {
	return func(yield func(job.Input, error) bool) {
		dec := jsontext.NewDecoder(lc)
		fail := func(i int, err error) {
			off := dec.InputOffset()
			if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok && se.ByteOffset > off {
				off = se.ByteOffset
			}
			line := lc.lineAt(off)
			if rerr := lc.err; rerr != nil {
				err = &arrayReadError{rerr}
			} else if i >= 0 {
				err = fmt.Errorf("element %d: %w", i, err)
			}
			yield(nil, &Error{Source: source, Line: line, Err: err})
		}
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) && lc.err == nil {
			fail(-1, errors.New("empty input: want a JSON array of objects"))
			return
		}
		if err != nil {
			fail(-1, err)
			return
		}
		if tok.Kind() != '[' {
			fail(-1, fmt.Errorf("the input is a JSON %s, want an array of objects", kindName(tok.Kind())))
			return
		}
		ld := newLineDecoder()
		for i := 0; ; i++ {
			if dec.PeekKind() == ']' {
				break
			}
			v, err := dec.ReadValue()
			if err != nil {
				fail(i, err)
				return
			}
			start := dec.InputOffset() - int64(len(v))
			lc.lastLine = lc.lineAt(start)
			if v[0] != '{' {
				if !yield(nil, &Error{Source: source, Line: lc.lastLine, Err: fmt.Errorf("element %d: a JSON %s, want an object", i, kindName(v.Kind()))}) {
					return
				}
				continue
			}
			var in job.Input
			if decode {
				if in, err = ld.decode(v); err != nil {
					if !yield(nil, &Error{Source: source, Line: lc.lastLine, Err: fmt.Errorf("element %d: %w", i, err)}) {
						return
					}
					continue
				}
			}
			if !yield(in, nil) {
				return
			}
		}
		if _, err := dec.ReadToken(); err != nil { // the closing ']'
			fail(-1, err)
			return
		}
		if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) || lc.err != nil {
			if err == nil || lc.err == nil {
				err = errors.New("data after the array")
			}
			fail(-1, err)
		}
	}
}

// kindName names a JSON kind for messages.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "value"
}

// lineCounter reads its input through a buffer, skipping a UTF-8 byte
// order mark at the start, and maps byte offsets of what it returned to
// lines. Offsets must be asked for in increasing order: it keeps only the
// offsets of the newlines not yet passed. It is owned by one sequence and
// not safe for concurrent use.
type lineCounter struct {
	br       *bufio.Reader
	off      int64   // bytes returned so far
	newlines []int64 // offsets of the newlines returned and not yet passed by lineAt
	passed   int     // newlines before the offset last asked for
	started  bool    // the byte order mark was checked
	err      error   // the read error met, other than io.EOF
	lastLine int     // the line of the last element read
}

func newLineCounter(r io.Reader) *lineCounter {
	return &lineCounter{br: bufio.NewReaderSize(r, 64<<10)}
}

// Read reads from the input, recording where its newlines are.
func (lc *lineCounter) Read(p []byte) (int, error) {
	if !lc.started {
		lc.started = true
		if b, err := lc.br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
			lc.br.Discard(len(utf8BOM))
		}
	}
	n, err := lc.br.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			lc.newlines = append(lc.newlines, lc.off+int64(i))
		}
	}
	lc.off += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && lc.err == nil {
		lc.err = err
	}
	return n, err
}

// lineAt returns the 1-based line of the byte at offset off, which is not
// before an offset asked for earlier.
func (lc *lineCounter) lineAt(off int64) int {
	k := 0
	for k < len(lc.newlines) && lc.newlines[k] < off {
		k++
	}
	lc.passed += k
	lc.newlines = lc.newlines[k:]
	if len(lc.newlines) == 0 {
		lc.newlines = nil // let the array go once drained
	}
	return lc.passed + 1
}
