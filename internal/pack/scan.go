package pack

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Entry is one member of a packed answer's object, as soon as its value
// closed.
type Entry struct {
	// ID is the member's key, unescaped.
	ID string
	// Value is the value as written, surrounding whitespace trimmed; nil
	// when Err is set. It is the caller's: the Scanner keeps no reference.
	Value json.RawMessage
	// Err is set when the value is not valid JSON; it names the id and
	// why.
	Err error
}

// state is where a Scanner is in the answer.
type state uint8

const (
	sBefore      state = iota // before the object's '{': text skipped
	sFirstKey                 // after '{': a key or '}'
	sKey                      // after ',': a key
	sInKey                    // inside a key's string
	sColon                    // after a key: ':'
	sValue                    // after ':': the value's first byte
	sInString                 // inside a string value
	sInContainer              // inside an object or array value
	sInScalar                 // inside a number, true, false, null or garbage
	sAfterValue               // after a value: ',' or '}'
	sClosed                   // after the object's '}': text ignored
	sFailed                   // unreadable: input ignored
)

// Scanner reads a packed answer as it streams: text, then one JSON object
// whose members are the agents' answers, then text. Text before the
// object's '{' (a code fence, a sentence) is skipped, unless it holds a
// '[': an answer that is a JSON array is an error. Text after the
// object's '}' is ignored.
//
// It reports each member the moment its value closes: an object, array
// or string value at its closing byte, a scalar at the ',', '}' or
// whitespace after it. Splitting the answer differently into pieces
// never changes what it reports. It holds only the bytes of the member
// being read and never recurses, so that any input is safe.
//
// A value that is not valid JSON is reported as an [Entry] with Err set,
// and the scanner goes on with the next member when it can find the
// value's end (brackets balanced, strings closed). A structure it cannot
// read (a key that is not a string, a missing ':' or ',') stops it: see
// [Scanner.Err].
//
// The zero value is ready to use. A Scanner is not safe for concurrent
// use.
type Scanner struct {
	state state
	off   int64  // bytes written before the current piece
	buf   []byte // the key being read, then the value being read
	start int64  // offset of the first byte of buf's key or value
	id    string // the key of the member whose value is being read
	depth int    // nesting of brackets inside a container value
	inStr bool   // inside a string of a container value
	esc   bool   // after a backslash inside a string
	err   error
}

// Write feeds the next piece p of the answer's text and calls emit for
// each member whose value closed within it, in order. Pieces may split
// the text anywhere, inside a rune or an escape too. emit must not call
// Write; nil drops the entries. After the object closed or Err is set,
// Write ignores its input.
func (s *Scanner) Write(p string, emit func(Entry)) {
	mark := -1 // start in p of the bytes of the key or value being read
	switch s.state {
	case sInKey, sInString, sInContainer, sInScalar:
		mark = 0 // begun in an earlier piece
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch s.state {
		case sBefore:
			switch c {
			case '{':
				s.state = sFirstKey
			case '[':
				s.fail(s.off+int64(i), "the answer is a JSON array, not an object")
				return
			}
		case sFirstKey, sKey:
			switch {
			case isSpace(c):
			case c == '"':
				s.state, s.esc, mark = sInKey, false, i
				s.start = s.off + int64(i)
				s.buf = s.buf[:0]
			case c == '}' && s.state == sFirstKey:
				s.state = sClosed
				return
			default:
				s.fail(s.off+int64(i), "want a key (a JSON string)%s, found %s", orEnd(s.state == sFirstKey), show(c))
				return
			}
		case sInKey:
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.buf = append(s.buf, p[mark:i+1]...)
				mark = -1
				id, err := unquote(s.buf)
				if err != nil {
					s.fail(s.start, "the key is not a valid JSON string: %v", err)
					return
				}
				s.id, s.state = id, sColon
			}
		case sColon:
			switch {
			case isSpace(c):
			case c == ':':
				s.state = sValue
			default:
				s.fail(s.off+int64(i), "want ':' after key %q, found %s", s.id, show(c))
				return
			}
		case sValue:
			if isSpace(c) {
				continue
			}
			s.buf, s.start, mark = s.buf[:0], s.off+int64(i), i
			switch c {
			case '"':
				s.state, s.esc = sInString, false
			case '{', '[':
				s.state, s.depth, s.inStr, s.esc = sInContainer, 1, false, false
			case ',', '}':
				// No value: an empty scalar, reported as invalid.
				s.emit(emit)
				mark = -1
				if !s.afterValue(c, s.off+int64(i)) {
					return
				}
			default:
				s.state = sInScalar
			}
		case sInString:
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.buf = append(s.buf, p[mark:i+1]...)
				mark = -1
				s.emit(emit)
				s.state = sAfterValue
			}
		case sInContainer:
			switch {
			case s.inStr:
				switch {
				case s.esc:
					s.esc = false
				case c == '\\':
					s.esc = true
				case c == '"':
					s.inStr = false
				}
			case c == '"':
				s.inStr = true
			case c == '{' || c == '[':
				s.depth++
			case c == '}' || c == ']':
				s.depth--
				if s.depth == 0 {
					s.buf = append(s.buf, p[mark:i+1]...)
					mark = -1
					s.emit(emit)
					s.state = sAfterValue
				}
			}
		case sInScalar:
			if c == ',' || c == '}' || isSpace(c) {
				s.buf = append(s.buf, p[mark:i]...)
				mark = -1
				s.emit(emit)
				if !s.afterValue(c, s.off+int64(i)) {
					return
				}
			}
		case sAfterValue:
			if !s.afterValue(c, s.off+int64(i)) {
				return
			}
		default: // sClosed, sFailed
			return
		}
	}
	if mark >= 0 {
		s.buf = append(s.buf, p[mark:]...)
	}
	s.off += int64(len(p))
}

// afterValue reads c, the byte at offset off after a member's value. It
// reports whether the scanner reads on.
func (s *Scanner) afterValue(c byte, off int64) bool {
	switch {
	case isSpace(c):
		s.state = sAfterValue
	case c == ',':
		s.state = sKey
	case c == '}':
		s.state = sClosed
		return false
	default:
		s.fail(off, "want ',' or '}' after the value of %q, found %s", s.id, show(c))
		return false
	}
	return true
}

// emit reports the member whose value is in buf.
func (s *Scanner) emit(emit func(Entry)) {
	e := Entry{ID: s.id}
	if json.Valid(s.buf) {
		e.Value = append(json.RawMessage(nil), s.buf...)
	} else {
		var v json.RawMessage
		err := json.Unmarshal(s.buf, &v) // not nil: only to say why
		e.Err = fmt.Errorf("pack: entry %q at byte %d: the value is not valid JSON: %v", s.id, s.start, err)
	}
	s.buf = s.buf[:0]
	if emit != nil {
		emit(e)
	}
}

// fail stops the scanner with the error of a structure it cannot read at
// byte off of the answer.
func (s *Scanner) fail(off int64, format string, args ...any) {
	s.state = sFailed
	s.buf = nil
	s.err = fmt.Errorf("pack: answer at byte %d: %s", off, fmt.Sprintf(format, args...))
}

// Closed reports whether the answer's top-level object has ended.
func (s *Scanner) Closed() bool { return s.state == sClosed }

// Err returns why the answer stopped being readable (not an object, a key
// that is not a string, a missing ':' or ',' ...), naming the byte
// offset in the answer; nil while it is readable, and after the object
// closed. After it, Write ignores its input.
func (s *Scanner) Err() error { return s.err }

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// orEnd is the alternative to a key after '{'.
func orEnd(first bool) string {
	if first {
		return " or '}'"
	}
	return ""
}

// show writes byte c for an error message.
func show(c byte) string {
	if c < utf8.RuneSelf {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// unquote returns the string that q, a JSON string with its quotes,
// holds. Keys without escapes, control characters or invalid UTF-8 are
// the common case and skip encoding/json.
func unquote(q []byte) (string, error) {
	body := q[1 : len(q)-1]
	plain := true
	for _, c := range body {
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(body), nil
	}
	var id string
	if err := json.Unmarshal(q, &id); err != nil {
		return "", err
	}
	return id, nil
}
