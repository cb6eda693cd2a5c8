package schema

import (
	"slices"
	"testing"
)

// oldRegionEnd is regionEnd before the shared scanner, kept only for
// FuzzScanDiff.
func oldRegionEnd(s string, start int) int {
	depth := 0
	inString, escaped := false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// oldMatch is scanner.match before the shared scanner.
func oldMatch(sc *scanner, start int) {
	stack := sc.stack[:0]
	inString, escaped := false, false
	t := sc.text
	for i := start; i < len(t); i++ {
		c := t[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			stack = append(stack, i)
		case '}', ']':
			n := len(stack) - 1
			sc.closeAt[stack[n]] = int32(i + 1)
			stack = stack[:n]
			if n == 0 {
				sc.stack = stack
				sc.budget -= i + 1 - start
				return
			}
		}
	}
	sc.budget -= len(t) - start
	for _, p := range stack {
		sc.closeAt[p] = -1
	}
	sc.stack = stack[:0]
}

func oldPlausible(span string, quote bool) bool {
	t := span[1:]
	for t != "" && (t[0] == ' ' || t[0] == '\t' || t[0] == '\r' || t[0] == '\n') {
		t = t[1:]
	}
	if t == "" {
		return false
	}
	c := t[0]
	if span[0] == '{' {
		return c == '"' || c == '}' || quote && c == '\''
	}
	set := `"{[]-0123456789tfn`
	if quote {
		set += `'`
	}
	for i := range len(set) {
		if set[i] == c {
			return true
		}
	}
	return false
}

// FuzzScanDiff checks the shared scanner against the hand-written loops it
// replaced: the same region ends, bracket matches and value-start tests on
// any input, from every opening bracket.
func FuzzScanDiff(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, "x\"}"]}`, `{"a": "\\"}`, `[{"a": "b\\\"c"}, {`, `x {"a" [}] "unclosed {`,
		"```json\n{\"a\": 1,\n```", `"{" {"b": "\\\\\"}"}`, `{ '`, `[ ]`, `{}`, `\"{}"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		newSc := scanner{text: s, closeAt: make([]int32, len(s)), budget: 1 << 30}
		oldSc := scanner{text: s, closeAt: make([]int32, len(s)), budget: 1 << 30}
		for i := range len(s) {
			if !isOpenBracket(s[i]) {
				continue
			}
			if got, want := regionEnd(s, i), oldRegionEnd(s, i); got != want {
				t.Fatalf("regionEnd(%q, %d) = %d, want %d", s, i, got, want)
			}
			if got, want := plausible(s[i:]), oldPlausible(s[i:], false); got != want {
				t.Fatalf("plausible(%q) = %v, want %v", s[i:], got, want)
			}
			if got, want := startsJSON(s[i:]), oldPlausible(s[i:], true); got != want {
				t.Fatalf("startsJSON(%q) = %v, want %v", s[i:], got, want)
			}
			if newSc.closeAt[i] == 0 {
				newSc.match(i)
			}
			if oldSc.closeAt[i] == 0 {
				oldMatch(&oldSc, i)
			}
			if newSc.budget != oldSc.budget || !slices.Equal(newSc.closeAt, oldSc.closeAt) {
				t.Fatalf("match(%q, %d): budget %d, closeAt %v, want %d, %v", s, i, newSc.budget, newSc.closeAt, oldSc.budget, oldSc.closeAt)
			}
		}
	})
}
