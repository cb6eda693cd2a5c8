package job

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
)

// utf8BOM is the byte order mark some tools write at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// maxKeptLine bounds the line buffer that JSONL keeps between lines, so that
// one huge line does not pin its memory for the rest of the file.
const maxKeptLine = 1 << 20

// JSONL reads r as JSON Lines: one JSON object per line, decoded lazily as
// the sequence is consumed, so inputs of any size are never held whole.
//
// Lines may be arbitrarily long. Blank (whitespace-only) lines are skipped
// but still count for line numbers. A trailing "\r" (CRLF files) and a UTF-8
// byte order mark at the start of the input are tolerated.
//
// A line that is not valid JSON, or holds something other than one object
// (an array, a number, an object followed by more data), yields
// (nil, *[InputError]) naming source and the line, and reading goes on with
// the next line. So does a line that encoding/json would decode only by
// dropping or replacing data: an object (at any depth) naming a key twice
// (wrapping [ErrDuplicateKey], naming the key and, below the top level, its
// path such as $.a.b), and text that is not valid UTF-8, including an
// escaped lone surrogate such as "\ud800" (wrapping [ErrInvalidUTF8]). Every row yielded without an error is a non-nil map. A read
// error of r yields one *InputError wrapping it and ends the sequence.
//
// The caller may stop the loop early; the rest of r is then left unread.
// The sequence reads r as it goes and is meant to be iterated once. It does
// not close r.
func JSONL(r io.Reader, source string) iter.Seq2[Input, error] {
	return func(yield func(Input, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		ld := newLineDecoder()
		var (
			long []byte // holds lines longer than br's buffer
			line int
		)
		for {
			b, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				long = append(long[:0], b...)
				for errors.Is(err, bufio.ErrBufferFull) {
					b, err = br.ReadSlice('\n')
					long = append(long, b...)
				}
				b = long
			}
			if err != nil && !errors.Is(err, io.EOF) {
				yield(nil, &InputError{Source: source, Line: line + 1, Err: fmt.Errorf("read: %w", err)})
				return
			}
			if len(b) == 0 { // io.EOF at the start of a line
				return
			}
			line++
			if line == 1 {
				b = bytes.TrimPrefix(b, utf8BOM)
			}
			if b = bytes.Trim(b, " \t\r\n"); len(b) > 0 {
				in, derr := ld.decode(b)
				if derr != nil {
					if !yield(nil, &InputError{Source: source, Line: line, Err: derr}) {
						return
					}
				} else if !yield(in, nil) {
					return
				}
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if cap(long) > maxKeptLine {
				long = nil
			}
		}
	}
}
