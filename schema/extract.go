package schema

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode"
)

// ErrNoJSON is returned by [Extract] when the text holds no JSON object or
// array.
var ErrNoJSON = errors.New("schema: no JSON value found")

// Extract finds the JSON object or array in a model's answer and returns a copy
// of its text, as it appears in the answer. It tries, in order:
//
//  1. the whole text, trimmed of white space, when it is a valid JSON object
//     or array;
//  2. the content of the first fenced code block (```json or a plain ```)
//     that is a valid JSON object or array;
//  3. the first balanced {...} span in the text that is valid JSON, scanning
//     with JSON string and escape rules and trying each start position in
//     turn; when a valid [...] span encloses that object (an array of
//     objects), the array is returned instead;
//  4. the first balanced [...] span that is valid JSON.
//
// Otherwise it returns [ErrNoJSON]. Scalars (a bare string or number) are
// never returned. The search is linear in practice; on pathological input (a
// very large number of unbalanced braces) it gives up after a bounded amount
// of work and returns [ErrNoJSON]. Extract is safe for concurrent use.
func Extract(text string) (json.RawMessage, error) {
	_, b, ok := extract(text)
	if !ok {
		return nil, ErrNoJSON
	}
	return b, nil
}

// extract returns a fresh copy of the JSON text found in text and its byte
// offset in text.
func extract(text string) (start int, b []byte, ok bool) {
	// 1. The whole answer is the JSON value: the common, cheap case.
	if t := strings.TrimSpace(text); isOpen(t) {
		if b := []byte(t); json.Valid(b) {
			return offset(text, strings.TrimLeftFunc(text, unicode.IsSpace)), b, true
		}
	}
	// 2. Fenced code blocks.
	if start, b, ok := extractFenced(text); ok {
		return start, b, ok
	}
	// 3 and 4. Balanced spans in prose.
	sc := scanner{text: text, budget: 16*len(text) + 1<<16}
	return sc.find()
}

// extractFenced returns the content of the first ```json or plain ``` fenced
// block of text that is a JSON object or array, and its offset in text.
func extractFenced(text string) (int, []byte, bool) {
	for f := range fences(text) {
		body := text[f.body.start:f.body.end]
		if t := strings.TrimSpace(body); isOpen(t) {
			if b := []byte(t); json.Valid(b) {
				return f.body.start + offset(body, strings.TrimLeftFunc(body, unicode.IsSpace)), b, true
			}
		}
	}
	return 0, nil, false
}

// scanner finds balanced JSON-like spans in prose.
type scanner struct {
	text string
	// bytes is a copy of text, made once, that candidates are validated in.
	bytes []byte
	// closeAt[i] records, for a bracket at i, 1+ the index of its matching
	// closing bracket, -1 when it has none, and 0 when not yet known.
	closeAt []int32
	// stack holds the open brackets of the current match scan.
	stack []int
	// budget bounds the bytes scanned and validated, so that pathological
	// input cannot make the search quadratic.
	budget int
}

// find returns the first valid object span, or the array enclosing it, or
// else the first valid array span, with its offset. The bytes returned are a
// copy of just the span, so that a caller keeping them does not keep the whole
// text.
func (sc *scanner) find() (int, []byte, bool) {
	if !strings.ContainsAny(sc.text, "{[") {
		return 0, nil, false
	}
	sc.bytes = []byte(sc.text)
	sc.closeAt = make([]int32, len(sc.text))
	sc.stack = make([]int, 0, 16)
	start, end, ok := sc.first('{', len(sc.text), 0)
	if ok {
		// An object inside a valid array is one element of the answer.
		if as, ae, ok := sc.first('[', start, end); ok {
			start, end = as, ae
		}
	} else if start, end, ok = sc.first('[', len(sc.text), 0); !ok {
		return 0, nil, false
	}
	return start, slices.Clone(sc.bytes[start:end]), true
}

// first returns the first span [start, end) of valid JSON that starts with the
// bracket open before limit and ends at or after minEnd.
func (sc *scanner) first(open byte, limit, minEnd int) (start, end int, ok bool) {
	for i := 0; i < limit; i++ {
		j := strings.IndexByte(sc.text[i:limit], open)
		if j < 0 {
			break
		}
		i += j
		if sc.closeAt[i] == 0 {
			sc.match(i)
		}
		if sc.budget <= 0 {
			break
		}
		c := int(sc.closeAt[i])
		if c < 0 || c < minEnd || !plausible(sc.text[i:c]) {
			continue
		}
		sc.budget -= c - i
		if json.Valid(sc.bytes[i:c]) {
			return i, c, true
		}
	}
	return 0, 0, false
}

// match scans from the bracket at start, outside any string, to its balancing
// bracket, following JSON string and escape rules, and records in closeAt the
// match of every bracket it sees outside strings on the way. Square and curly
// brackets count alike; json.Valid rejects mismatched pairs later.
func (sc *scanner) match(start int) {
	stack := sc.stack[:0]
	t := sc.text
	for i := nextBracket(t, start); i < len(t); i = nextBracket(t, i+1) {
		if isOpenBracket(t[i]) {
			stack = append(stack, i)
			continue
		}
		n := len(stack) - 1
		sc.closeAt[stack[n]] = int32(i + 1)
		stack = stack[:n]
		if n == 0 {
			sc.stack = stack
			sc.budget -= i + 1 - start
			return
		}
	}
	sc.budget -= len(t) - start
	for _, p := range stack {
		sc.closeAt[p] = -1
	}
	sc.stack = stack[:0]
}
