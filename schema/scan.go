package schema

import (
	"iter"
	"strings"
	"unicode"
)

// This file is the one JSON text scanner that [Extract] and [Repair]
// share: Markdown fences, string skipping, bracket walking and the quick
// test of whether a bracket can start a JSON value. It reads text that may
// not be JSON at all (prose around the value, a value cut short), which is
// why it is not jsontext.Decoder: that finds the boundaries of valid values
// only. For the same reason the strict token reader of Repair, lex in
// repair.go, is hand-written: jsontext stops at the trailing comma or the
// cut that Repair must read past. Validation is encoding/json's.

// span is a range [start, end) of byte offsets.
type span struct{ start, end int }

// empty reports whether s holds no bytes.
func (s span) empty() bool {
	return s.end <= s.start
}

// contains reports whether s strictly contains t.
func (s span) contains(t span) bool {
	return s.start <= t.start && t.end <= s.end && s.end-s.start > t.end-t.start
}

// offset returns the byte offset in text of suffix, a suffix of text.
func offset(text, suffix string) int {
	return len(text) - len(suffix)
}

// isOpen reports whether s starts like a JSON object or array.
func isOpen(s string) bool {
	return s != "" && (s[0] == '{' || s[0] == '[')
}

// isSpace reports whether s is all white space.
func isSpace(s string) bool {
	return strings.TrimLeftFunc(s, unicode.IsSpace) == ""
}

// fence is one fenced code block of a text: the offset of its opening
// backticks, its body, and the offset just past its closing backticks (the
// end of the text for an unclosed fence).
type fence struct {
	open  int
	body  span
	close int
}

// fences yields the ```json and plain ``` fenced blocks of text, in order.
// A one-line fence such as ```{"a":1}``` is not a block (the prose scan
// finds its content), and an unclosed fence (a truncated answer) runs to the
// end of the text.
func fences(text string) iter.Seq[fence] {
	return func(yield func(fence) bool) {
		const marker = "```"
		rest := text
		for {
			i := strings.Index(rest, marker)
			if i < 0 {
				return
			}
			open := offset(text, rest) + i
			rest = strings.TrimLeft(rest[i:], "`")
			nl := strings.IndexByte(rest, '\n')
			if nl < 0 {
				return
			}
			info := strings.TrimSpace(rest[:nl])
			if strings.Contains(info, marker) {
				rest = rest[nl+1:]
				continue
			}
			body := rest[nl+1:]
			end := strings.Index(body, marker)
			if end < 0 {
				end = len(body)
			}
			// After an unclosed fence rest is empty, which ends the loop.
			rest = strings.TrimLeft(body[end:], "`")
			lang, _, _ := strings.Cut(info, " ")
			if lang == "" || strings.EqualFold(lang, "json") {
				start := offset(text, body)
				if !yield(fence{open: open, body: span{start, start + end}, close: offset(text, rest)}) {
					return
				}
			}
		}
	}
}

// skipString returns the offset just past the closing quote of the string
// whose opening quote is at s[i], and closed=true; or len(s) and false when
// the string is not closed. A backslash escapes the byte after it, whatever
// it is: a quote ends the string when an even number of backslashes precede
// it. Escapes are not checked here; lexString checks them.
func skipString(s string, i int) (end int, closed bool) {
	for j := i + 1; ; j++ {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s), false
		}
		j += k
		n := 0 // backslashes before the quote; the opening quote stops the count
		for s[j-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
	}
}

// nextBracket returns the offset of the first bracket ({, [, } or ]) at or
// after i that is outside JSON strings, where s[i:] starts outside a string,
// or len(s) when there is none.
func nextBracket(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '{', '[', '}', ']':
			return i
		case '"':
			end, _ := skipString(s, i)
			i = end - 1
		}
	}
	return len(s)
}

// isOpenBracket reports whether c is { or [.
func isOpenBracket(c byte) bool {
	return c == '{' || c == '['
}

// regionEnd returns the end of the bracketed value starting at start in s:
// just after its balancing bracket, following JSON string rules, or len(s)
// when it is not closed (a truncated answer). Square and curly brackets
// count alike, as in scanner.match.
func regionEnd(s string, start int) int {
	depth := 0
	for i := nextBracket(s, start); i < len(s); i = nextBracket(s, i+1) {
		if isOpenBracket(s[i]) {
			depth++
			continue
		}
		if depth--; depth == 0 {
			return i + 1
		}
	}
	return len(s)
}

// contentStart returns the first byte after s[0], an opening bracket, and
// any JSON white space, or 0 when there is none.
func contentStart(s string) byte {
	t := strings.TrimLeft(s[1:], " \t\r\n")
	if t == "" {
		return 0
	}
	return t[0]
}

// plausible is a cheap test that rejects most bracketed prose, such as
// "{placeholder}" or "[see above]", before the costlier json.Valid: the
// first byte after the opening bracket s[0] must be able to start its
// content.
func plausible(s string) bool {
	c := contentStart(s)
	if s[0] == '{' {
		return c == '"' || c == '}'
	}
	return c != 0 && strings.IndexByte(`"{[]-0123456789tfn`, c) >= 0
}

// startsJSON reports whether s, which starts with an opening bracket, can be
// the start of a JSON value that is worth repairing, or worth reporting as
// broken: it is plausible, or its content starts with a single quote.
func startsJSON(s string) bool {
	return plausible(s) || contentStart(s) == '\''
}
