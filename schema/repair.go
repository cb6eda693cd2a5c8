package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unicode"

	"github.com/kaptinlin/jsonrepair"
)

// Repair limits. Beyond them Repair refuses rather than spend unbounded time:
// the repair library is not linear on every input.
const (
	// maxRepairBytes bounds the text Repair works on.
	maxRepairBytes = 1 << 20
	// maxRepairCandidates bounds how many places in the text Repair tries.
	maxRepairCandidates = 8
	// maxRepairDepth bounds the nesting of a repaired value.
	maxRepairDepth = 512
	// maxLibraryBytes bounds the values given to jsonrepair, whose running
	// time grows with the square of the size on some inputs (a truncated
	// array: about 12 ms and 11 MB allocated for 10 KB, 1 s for 100 KB).
	// Larger values are repaired from the token plan alone.
	maxLibraryBytes = 16 << 10
)

// The repairs [Repair] reports, in this order.
const (
	repairFence  = "removed a Markdown fence"
	repairProse  = "removed text around the JSON"
	repairComma  = "removed a trailing comma"
	repairCommas = "removed %d trailing commas"
)

// Repair fixes a model's answer whose JSON value is broken in a way that has
// exactly one reading, and returns the value as compact JSON, the repairs made
// (one human-readable line each, such as "removed a trailing comma") and
// ok=true. It never invents, drops or changes a value: when no such repair
// exists it returns nil, nil, false.
//
// The repairs allowed are:
//
//   - removing a Markdown fence (```json or a plain ```) around the value,
//     "removed a Markdown fence";
//   - removing text before or after the value, "removed text around the JSON";
//   - removing a comma before a closing bracket or brace, or at the end of a
//     truncated answer, "removed a trailing comma" or "removed N trailing
//     commas";
//   - closing the brackets and braces still open at the end of a truncated
//     answer, when the cut falls after a complete value (or after a comma
//     that follows one): `{"a": [1, "x"` becomes {"a":[1,"x"]}, reported as
//     `closed 2 unclosed brackets at the end: "]}"`.
//
// Everything else is refused, in particular: a cut inside a string
// (`{"a": "hel`), after a member name (`{"a": 1, "b"`) or a colon
// (`{"a": `), right after an opening bracket (`{"a": [`, which would add an
// empty array), and a number at the very end of the text (`{"n": 12` may have
// been cut from 1234; a number followed by white space or a comma is
// complete). Single quotes, comments, unquoted names, Python constants, NaN,
// missing commas or colons, mismatched brackets and raw control characters in
// strings are refused too: fixing them means guessing (is the apostrophe in
// 'O'Brien' the end of the string?).
//
// Text that already holds a valid JSON object or array gives it back with
// only the fence and text removals listed (nil when there was nothing
// around it). Scalars are never returned.
//
// Repair first reads the value as JSON tokens and plans the repair: which
// commas go and which brackets close it. The repair is also made by
// github.com/kaptinlin/jsonrepair, and accepted only when the tokens of the
// library's result (strings, numbers, literals and punctuation, in order,
// as written) are exactly the planned ones, so that neither can slip in
// another kind of fix; when they disagree, Repair refuses. Values over 16
// KiB, on which the library slows down with the square of the size, are
// repaired from the plan alone.
//
// Repair tries the fenced blocks of the text first, then each opening
// bracket that can start JSON, in order, skipping past a failed candidate;
// it gives up on text over 1 MiB or nested over 512 deep. Repair is safe for
// concurrent use.
func Repair(text string) (json.RawMessage, []string, bool) {
	r, _, ok := repair(text, span{})
	if !ok {
		return nil, nil, false
	}
	return r.out, r.repairs, true
}

type repairResult struct {
	out     []byte   // compact JSON
	repairs []string // nil when none
}

// repair implements [Repair]. When inside is not empty, only candidates whose
// region strictly contains it are tried: [Schema.ParseRepaired] uses
// this to prefer a repaired whole to a valid fragment of it. When no
// candidate can be repaired, broken is the text of the first candidate, or
// "" when there is none.
func repair(text string, inside span) (r repairResult, broken string, ok bool) {
	if len(text) > maxRepairBytes {
		return repairResult{}, "", false
	}
	tries := 0
	for c := range candidates(text, inside) {
		if tries == 0 {
			broken = text[c.region.start:c.region.end]
		}
		if tries == maxRepairCandidates {
			break
		}
		tries++
		out, fixes, ok := repairValue(text[c.region.start:c.region.end])
		if !ok {
			continue
		}
		var repairs []string
		if c.fenced {
			repairs = append(repairs, repairFence)
		}
		if c.prose {
			repairs = append(repairs, repairProse)
		}
		return repairResult{out: out, repairs: append(repairs, fixes...)}, "", true
	}
	return repairResult{}, broken, false
}

// candidate is a place in a text where a JSON value may be: region runs from
// an opening bracket to its balancing bracket, or to the end of the text or
// fence when there is none.
type candidate struct {
	region span
	fenced bool // the region is in a fenced block
	prose  bool // there is other text around the region (and its fence)
}

// candidates yields the candidates of text in the order Repair tries them:
// the fenced blocks whose body starts with a bracket (the first
// maxRepairCandidates of them), then each opening bracket that can start
// JSON, in order, skipping past the region of the one before. When inside
// is not empty, it yields only the regions that strictly contain it.
func candidates(text string, inside span) iter.Seq[candidate] {
	return func(yield func(candidate) bool) {
		n := 0 // fences whose body starts with a bracket
		for f := range fences(text) {
			body := text[f.body.start:f.body.end]
			trimmed := strings.TrimLeftFunc(body, unicode.IsSpace)
			if !isOpen(trimmed) {
				continue
			}
			if n == maxRepairCandidates {
				break
			}
			n++
			start := f.body.start + offset(body, trimmed)
			if !inside.empty() && start >= inside.start {
				// As in the prose loop below: a region that starts after
				// inside cannot contain it, nor can the one that starts
				// where it does (it ends where inside does, or sooner at
				// the closing fence). Fences come in order, so no later
				// one can either.
				break
			}
			region := span{start, f.body.start + regionEnd(body, start-f.body.start)}
			if !inside.empty() && !region.contains(inside) {
				continue
			}
			prose := !isSpace(text[:f.open]) || !isSpace(text[region.end:f.body.end]) || !isSpace(text[f.close:])
			if !yield(candidate{region: region, fenced: true, prose: prose}) {
				return
			}
		}
		limit := len(text)
		if !inside.empty() {
			// A region that starts later cannot contain inside, nor can the
			// one that starts where it does: it ends where it does.
			limit = inside.start
		}
		for i := 0; i < limit; {
			j := strings.IndexAny(text[i:limit], "{[")
			if j < 0 {
				return
			}
			start := i + j
			if !startsJSON(text[start:]) {
				i = start + 1
				continue
			}
			region := span{start, regionEnd(text, start)}
			i = region.end
			if !inside.empty() && !region.contains(inside) {
				continue
			}
			prose := !isSpace(text[:region.start]) || !isSpace(text[region.end:])
			if !yield(candidate{region: region, prose: prose}) {
				return
			}
		}
	}
}

// repairValue repairs s, the text of one JSON object or array from its
// opening bracket to its balancing bracket or the end of a truncated answer.
// It returns the value as compact JSON and the fixes made to it.
func repairValue(s string) ([]byte, []string, bool) {
	if json.Valid([]byte(s)) {
		return compact([]byte(s)), nil, true
	}
	toks, ok := lex(s)
	if !ok {
		return nil, nil, false
	}
	commas, closers, ok := plan(s, toks)
	if !ok {
		return nil, nil, false
	}
	// The planned repair: the tokens kept, as written and without white
	// space, then the closing brackets. This is its compact JSON.
	out := make([]byte, 0, len(s)+len(closers))
	for _, tk := range toks {
		if tk.kind != tokDropped {
			out = append(out, s[tk.start:tk.end]...)
		}
	}
	out = append(out, closers...)
	if !json.Valid(out) {
		return nil, nil, false
	}
	if len(s) <= maxLibraryBytes {
		// The library's repair must be the planned one: the same tokens in
		// the same order, which for valid JSON means the same compact text.
		fixed, err := jsonrepair.Repair(s)
		if err != nil {
			return nil, nil, false
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(fixed)); err != nil || !bytes.Equal(buf.Bytes(), out) {
			return nil, nil, false
		}
	}
	var fixes []string
	switch {
	case commas == 1:
		fixes = append(fixes, repairComma)
	case commas > 1:
		fixes = append(fixes, fmt.Sprintf(repairCommas, commas))
	}
	if closers != "" {
		fixes = append(fixes, closedMessage(closers))
	}
	return out, fixes, true
}

// closedMessage says which brackets were closed at the end.
func closedMessage(closers string) string {
	if len(closers) == 1 {
		return "closed 1 unclosed bracket at the end: " + strconv.Quote(closers)
	}
	return "closed " + strconv.Itoa(len(closers)) + " unclosed brackets at the end: " + strconv.Quote(closers)
}

// tokenKind classifies a JSON token.
type tokenKind uint8

const (
	tokDropped tokenKind = iota // a trailing comma that the repair removes
	tokOpen                     // { or [
	tokClose                    // } or ]
	tokColon                    // :
	tokComma                    // ,
	tokString                   // a complete string, with its quotes
	tokNumber                   // a number
	tokLiteral                  // true, false or null
)

// token is one JSON token of a text: its kind and where it is. It holds no
// pointers, so that the garbage collector need not scan token slices.
type token struct {
	start, end int32
	kind       tokenKind
}

// lex splits s, at most maxRepairBytes long, into JSON tokens, skipping
// JSON white space. It fails on anything that is not a JSON token as
// written: a string left open, a raw control character or a bad escape in a
// string, a malformed number, a cut or unknown literal, or any other
// character.
func lex(s string) ([]token, bool) {
	toks := make([]token, 0, len(s)/4+1)
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		var kind tokenKind
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '{' || c == '[':
			kind, i = tokOpen, i+1
		case c == '}' || c == ']':
			kind, i = tokClose, i+1
		case c == ':':
			kind, i = tokColon, i+1
		case c == ',':
			kind, i = tokComma, i+1
		case c == '"':
			n, ok := lexString(s[i:])
			if !ok {
				return nil, false
			}
			kind, i = tokString, i+n
		case c == '-' || '0' <= c && c <= '9':
			n, ok := lexNumber(s[i:])
			if !ok {
				return nil, false
			}
			kind, i = tokNumber, i+n
		default:
			var ok bool
			for _, lit := range [...]string{"true", "false", "null"} {
				if strings.HasPrefix(s[i:], lit) {
					kind, i, ok = tokLiteral, i+len(lit), true
					break
				}
			}
			if !ok {
				return nil, false
			}
		}
		toks = append(toks, token{start: int32(start), end: int32(i), kind: kind})
	}
	return toks, true
}

// lexString returns the length of the JSON string at the start of s, which
// starts with a quote, including both quotes. The string must be closed and
// hold no raw control character and only the escapes JSON allows.
func lexString(s string) (int, bool) {
	end, closed := skipString(s, 0)
	if !closed {
		return 0, false
	}
	body := s[1 : end-1]
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c < 0x20:
			return 0, false
		case c == '\\':
			// skipString leaves no backslash last in body.
			i++
			switch body[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(body) {
					return 0, false
				}
				for _, h := range []byte(body[i+1 : i+5]) {
					if !isHex(h) {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return end, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// lexNumber returns the length of the JSON number at the start of s:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, followed by a byte that
// cannot continue a number.
func lexNumber(s string) (int, bool) {
	i := 0
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(s) && strings.IndexByte("0123456789.eE+-", s[i]) >= 0 {
		// "01", "1.2.3", "1e5e": not one JSON number.
		return 0, false
	}
	return i, true
}

// parser states of plan.
const (
	wantValue        = iota // a value
	wantValueOrClose        // a value or "]", after "["
	wantKey                 // a member name, after "," in an object
	wantKeyOrClose          // a member name or "}", after "{"
	wantColon               // ":", after a member name
	afterValue              // ",", or a closing bracket, after a complete value
)

// plan parses toks, the tokens of s, as one JSON value that may have
// trailing commas and may be cut short after a complete value. It marks the
// trailing commas tokDropped and returns how many there are and the
// brackets to append.
func plan(s string, toks []token) (commas int, closers string, ok bool) {
	if len(toks) == 0 || toks[0].kind != tokOpen {
		return 0, "", false
	}
	// first returns the first byte of a token: all of a punctuation token.
	first := func(tk token) byte { return s[tk.start] }
	var stack []byte // open brackets
	state := wantValue
	done := false // the value is closed
	for i, tk := range toks {
		if done {
			return 0, "", false
		}
		switch state {
		case wantValue, wantValueOrClose:
			switch {
			case tk.kind == tokOpen:
				if len(stack) == maxRepairDepth {
					return 0, "", false
				}
				stack = append(stack, first(tk))
				state = wantValueOrClose
				if first(tk) == '{' {
					state = wantKeyOrClose
				}
			case tk.kind == tokClose && state == wantValueOrClose && first(tk) == ']':
				stack = stack[:len(stack)-1]
				done = len(stack) == 0
				state = afterValue
			case tk.kind == tokString || tk.kind == tokNumber || tk.kind == tokLiteral:
				state = afterValue
			default:
				return 0, "", false
			}
		case wantKey, wantKeyOrClose:
			switch {
			case tk.kind == tokString:
				state = wantColon
			case tk.kind == tokClose && state == wantKeyOrClose && first(tk) == '}':
				stack = stack[:len(stack)-1]
				done = len(stack) == 0
				state = afterValue
			default:
				return 0, "", false
			}
		case wantColon:
			if tk.kind != tokColon {
				return 0, "", false
			}
			state = wantValue
		case afterValue:
			top := closing(stack[len(stack)-1])
			switch tk.kind {
			case tokComma:
				if i+1 == len(toks) || toks[i+1].kind == tokClose && first(toks[i+1]) == top {
					// A trailing comma: drop it; the value before it stays
					// the last one.
					toks[i].kind = tokDropped
					commas++
					continue
				}
				state = wantValue
				if top == '}' {
					state = wantKey
				}
			case tokClose:
				if first(tk) != top {
					return 0, "", false
				}
				stack = stack[:len(stack)-1]
				done = len(stack) == 0
			default:
				return 0, "", false
			}
		}
	}
	if done {
		return commas, "", true
	}
	// A truncated answer: the cut must fall after a complete value.
	if state != afterValue {
		return 0, "", false
	}
	if last := toks[len(toks)-1]; last.kind == tokNumber && int(last.end) == len(s) {
		// The number may have been cut: 12 may be the start of 1234.
		return 0, "", false
	}
	b := make([]byte, len(stack))
	for i, open := range stack {
		b[len(stack)-1-i] = closing(open)
	}
	return commas, string(b), true
}

// closing returns the bracket that closes open.
func closing(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}
