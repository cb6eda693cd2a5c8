package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/batchagent/batchagent/job"
)

// utf8BOM is the byte order mark some tools write at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// maxKeptLine bounds the line buffer that JSONL keeps between lines, so that
// one huge line does not pin its memory for the rest of the file.
const maxKeptLine = 1 << 20

// blank holds the bytes a JSONL line may hold around its object; a line of
// nothing else is blank and holds no row.
const blank = " \t\r\n"

// JSONL reads r as JSON Lines: one JSON object per line, decoded lazily as
// the sequence is consumed, so inputs of any size are never held whole.
//
// Lines may be arbitrarily long. Blank (whitespace-only) lines are skipped
// but still count for line numbers. A trailing "\r" (CRLF files) and a UTF-8
// byte order mark at the start of the input are tolerated.
//
// A line that is not valid JSON, or holds something other than one object
// (an array, a number, an object followed by more data), yields
// (nil, *[Error]) naming source and the line, and reading goes on with
// the next line. So does a line that encoding/json would decode only by
// dropping or replacing data: an object (at any depth) naming a key twice
// (wrapping [ErrDuplicateKey], naming the key and, below the top level, its
// path such as $.a.b), and text that is not valid UTF-8, including an
// escaped lone surrogate such as "\ud800" (wrapping [ErrInvalidUTF8]). Every
// row yielded without an error is a non-nil map. A read error of r yields
// one *Error wrapping it and ends the sequence.
//
// The caller may stop the loop early; the rest of r is then left unread.
// The sequence reads r as it goes and is meant to be iterated once. It does
// not close r.
func JSONL(r io.Reader, source string) iter.Seq2[job.Input, error] {
	return func(yield func(job.Input, error) bool) {
		lr := newLineReader(r, true)
		ld := newLineDecoder()
		for {
			b, err := lr.next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, &Error{Source: source, Line: lr.line, Err: fmt.Errorf("read: %w", err)})
				return
			}
			in, derr := ld.decode(b)
			if derr != nil {
				if !yield(nil, &Error{Source: source, Line: lr.line, Err: derr}) {
					return
				}
			} else if !yield(in, nil) {
				return
			}
		}
	}
}

// lineReader splits JSON Lines into the lines that hold a row. It is the one
// place where the rules of what a row is live, shared by [JSONL] and
// [CountJSONL]: a line ends at "\n" or at the end of the input, a UTF-8 byte
// order mark at the start of the input is not content, and a line of blank
// bytes only holds no row. It is owned by one caller and not safe for
// concurrent use.
type lineReader struct {
	br   *bufio.Reader
	keep bool   // whether next returns the rows' bytes
	long []byte // holds lines longer than br's buffer, when keep is set
	line int    // 1-based number of the line last read
	eof  bool   // whether the end of the input was met
}

// newLineReader returns a lineReader of r. With keep unset, next reports
// rows without their bytes and holds no more than its buffer, however long
// a line is.
func newLineReader(r io.Reader, keep bool) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), keep: keep}
}

// next reads on to the next line that holds a row. A nil error means it
// found one, on line lr.line; with keep set, it returns the row's bytes,
// trimmed of blank bytes and valid until the next call. At the end of the
// input next returns io.EOF. Any other error is a read error of the input,
// met on line lr.line; the part of that line read before it is dropped.
func (lr *lineReader) next() ([]byte, error) {
	for !lr.eof {
		b, content, n, err := lr.readLine()
		if errors.Is(err, io.EOF) {
			lr.eof = true
			if n == 0 { // the end of the input at the start of a line
				break
			}
		}
		lr.line++
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if content {
			return b, nil
		}
	}
	return nil, io.EOF
}

// readLine reads one line, its "\n" included, and reports whether it holds
// content: more than blank bytes and, on the first line, a byte order mark.
// With keep set, it returns that content. n is the number of bytes read.
func (lr *lineReader) readLine() (b []byte, content bool, n int, err error) {
	b, err = lr.br.ReadSlice('\n')
	n = len(b)
	if lr.line == 0 {
		b = bytes.TrimPrefix(b, utf8BOM) // a line's first piece is all of it or fills br
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		if lr.keep {
			lr.long = append(lr.long[:0], b...)
		} else {
			content = hasContent(b)
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = lr.br.ReadSlice('\n')
			n += len(b)
			if lr.keep {
				lr.long = append(lr.long, b...)
			} else {
				content = content || hasContent(b)
			}
		}
		if !lr.keep {
			return nil, content, n, err
		}
		b = lr.long
		if cap(lr.long) > maxKeptLine {
			lr.long = nil // b stays valid: the next line gets a new buffer
		}
	}
	b = bytes.Trim(b, blank)
	return b, len(b) > 0, n, err
}

// hasContent reports whether b holds more than blank bytes.
func hasContent(b []byte) bool { return len(bytes.Trim(b, blank)) > 0 }
