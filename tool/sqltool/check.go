package sqltool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNotReadOnly is wrapped by the error sql_query returns for a statement
// its read-only check refuses: anything but one SELECT, WITH … SELECT or
// EXPLAIN statement.
var ErrNotReadOnly = errors.New("sqltool: not a read-only query")

// readOnlyHint ends every refusal: it tells the model what would run.
const readOnlyHint = "only one read-only query runs: SELECT, WITH … SELECT or EXPLAIN"

// tokenKind classifies a token of SQL text.
type tokenKind uint8

const (
	tokWord     tokenKind = iota // keyword or bare identifier
	tokQuoted                    // quoted identifier: "x", `x` or [x]
	tokString                    // string literal: 'x'
	tokNumber                    // numeric literal
	tokVariable                  // bound parameter: ?, ?1, :a, @a, $a, #a
	tokSemi                      // ;
	tokPunct                     // any other single byte
)

// token is one token of SQL text; comments and white space are dropped.
type token struct {
	kind tokenKind
	text string
}

// refuse returns the error for a statement the check refuses.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s; %s", ErrNotReadOnly, fmt.Sprintf(format, args...), readOnlyHint)
}

// checkStatement reports whether sql is one read-only statement: SELECT,
// WITH (with no data-modifying statement in it) or EXPLAIN [QUERY PLAN] of
// one of those, optionally followed by semicolons, white space and comments.
// Every refusal wraps ErrNotReadOnly and names what was refused.
//
// generic selects a stricter lexer for databases other than SQLite, whose
// lexical rules differ: it also refuses what different databases read
// differently (see tokenize).
func checkStatement(sql string, generic bool) error {
	toks, err := tokenize(sql, generic)
	if err != nil {
		return err
	}
	end := len(toks)
	for i, t := range toks {
		if t.kind != tokSemi {
			continue
		}
		end = i
		for _, rest := range toks[i+1:] {
			if rest.kind != tokSemi {
				return refuse("multiple statements are not allowed (a second statement, %s, follows ';')", kindOf(rest))
			}
		}
		break
	}
	return checkTokens(toks[:end])
}

// checkTokens checks the tokens of one statement.
func checkTokens(toks []token) error {
	if len(toks) == 0 {
		return refuse("empty statement")
	}
	first := toks[0]
	if first.kind != tokWord {
		return refuse("a statement cannot start with %s", kindOf(first))
	}
	switch kw := kindOf(first); kw {
	case "SELECT", "WITH":
		return checkBody(kw, toks)
	case "EXPLAIN":
		rest := toks[1:]
		if len(rest) >= 2 && isWord(rest[0], "QUERY") && isWord(rest[1], "PLAN") {
			rest = rest[2:]
		}
		if len(rest) == 0 {
			return refuse("EXPLAIN of nothing")
		}
		if !isWord(rest[0], "SELECT") && !isWord(rest[0], "WITH") {
			return refuse("EXPLAIN %s is not allowed", kindOf(rest[0]))
		}
		return checkTokens(rest)
	default:
		return refuse("%s statements are not allowed", kw)
	}
}

// checkBody refuses the words that make a SELECT or WITH statement write:
// a data-modifying statement inside WITH (WITH x AS (DELETE … RETURNING *)
// in PostgreSQL, WITH … INSERT in SQLite) and SELECT … INTO, which creates a
// table or writes a file in some databases. REPLACE and MERGE followed by
// '(' are function calls, and a word after '.' is a column name; both pass.
func checkBody(kw string, toks []token) error {
	for i, t := range toks {
		if t.kind != tokWord || i > 0 && toks[i-1].kind == tokPunct && toks[i-1].text == "." {
			continue
		}
		w := slices.IndexFunc(writeWords, func(w string) bool { return strings.EqualFold(t.text, w) })
		if w < 0 {
			continue
		}
		word := writeWords[w]
		if (word == "REPLACE" || word == "MERGE") && i+1 < len(toks) && toks[i+1].kind == tokPunct && toks[i+1].text == "(" {
			continue
		}
		return refuse("%s … %s is not allowed (quote an identifier of that name)", kw, word)
	}
	return nil
}

// writeWords are the words checkBody refuses.
var writeWords = []string{"INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "INTO"}

// isWord reports whether t is the bare word w, in any case.
func isWord(t token, w string) bool {
	return t.kind == tokWord && strings.EqualFold(t.text, w)
}

// kindOf names a token in an error: a statement's first word, upper-cased,
// or the token's text, quoted.
func kindOf(t token) string {
	text := t.text
	if len(text) > maxKindLen {
		text = text[:maxKindLen] + "…"
	}
	if t.kind == tokWord {
		return strings.ToUpper(text)
	}
	return fmt.Sprintf("%q", text)
}

// maxKindLen bounds the token text quoted in an error.
const maxKindLen = 32

// tokenize splits sql into tokens the way SQLite's tokenizer does (tokenize.c
// in SQLite 3.53), dropping white space and comments: strings in single
// quotes (a doubled quote stands for one); identifiers "…", `…` and […];
// -- and /* */ comments (an unfinished /* comment runs to the end, as in
// SQLite); parameters ?NNN, :name, @name, #name and $name, with SQLite's Tcl
// suffixes "::" and "(…)". A NUL byte, an unterminated string or quoted
// identifier is an error.
//
// With generic set it also refuses what databases read differently, so that
// no database can see a second statement or a hidden keyword where this
// lexer sees a string or a comment: a backslash or ';' inside a string or
// quoted identifier (MySQL's escapes), ';' or a nested "/*" inside a comment
// (PostgreSQL nests comments), "/*!" comments (MySQL runs their contents),
// "--" not followed by white space (MySQL needs it), '#' (a comment in MySQL)
// and '$' not followed by a digit (PostgreSQL's dollar quoting); […] is a
// quoted identifier that may not hold quotes or comment markers, and
// parameters have no Tcl suffixes.
func tokenize(sql string, generic bool) ([]token, error) {
	toks := make([]token, 0, len(sql)/4+1) // about one token per 4 bytes
	i := 0
	for i < len(sql) {
		c := sql[i]
		start := i
		switch {
		case c == 0:
			return nil, refuse("NUL byte at offset %d", i)
		case isSpace(c):
			i++
			continue
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			if generic && i+2 < len(sql) && !isSpace(sql[i+2]) {
				return nil, refuse(`"--" must be followed by a space to start a comment`)
			}
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql) - i
			}
			if generic && strings.IndexByte(sql[i:i+end], ';') >= 0 {
				return nil, refuse("';' inside a comment")
			}
			i += end
			continue
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			body, n := sql[i+2:], 0
			if end := strings.Index(body, "*/"); end >= 0 {
				body, n = body[:end], end+2
			} else {
				n = len(body)
			}
			if generic {
				switch {
				case strings.HasPrefix(body, "!"):
					return nil, refuse(`"/*!" comments are not allowed`)
				case strings.Contains(body, "/*"):
					return nil, refuse("nested comments are not allowed")
				case strings.IndexByte(body, ';') >= 0:
					return nil, refuse("';' inside a comment")
				}
			}
			i += 2 + n
			continue
		case c == '\'' || c == '"' || c == '`':
			n, ok := quotedLen(sql[i:], c)
			if !ok {
				return nil, refuse("unterminated %s starting at offset %d", quoteName(c), i)
			}
			body := sql[i+1 : i+n-1]
			if generic && strings.ContainsAny(body, `\;`) {
				return nil, refuse(`a backslash or ';' inside a %s; pass such values in "args"`, quoteName(c))
			}
			i += n
			kind := tokQuoted
			if c == '\'' {
				kind = tokString
			}
			toks = append(toks, token{kind, sql[start:i]})
			continue
		case c == '[':
			end := strings.IndexByte(sql[i:], ']')
			if end < 0 {
				return nil, refuse("unterminated [identifier] starting at offset %d", i)
			}
			if generic && strings.ContainsAny(sql[i+1:i+end], "'\"`\\;-/*#$") {
				return nil, refuse("a quote, ';' or comment marker inside [brackets]")
			}
			i += end + 1
			toks = append(toks, token{tokQuoted, sql[start:i]})
			continue
		case c == ';':
			i++
			toks = append(toks, token{tokSemi, ";"})
			continue
		case isDigit(c) || c == '.' && i+1 < len(sql) && isDigit(sql[i+1]):
			i += numberLen(sql[i:])
			toks = append(toks, token{tokNumber, sql[start:i]})
			continue
		case c == '?':
			i++
			for i < len(sql) && isDigit(sql[i]) {
				i++
			}
			toks = append(toks, token{tokVariable, sql[start:i]})
			continue
		case generic && c == '#':
			return nil, refuse("'#' is not allowed (it starts a comment in MySQL)")
		case generic && c == '$':
			i++
			if i >= len(sql) || !isDigit(sql[i]) {
				return nil, refuse(`'$' must be followed by a digit (dollar-quoted strings are not allowed)`)
			}
			for i < len(sql) && isDigit(sql[i]) {
				i++
			}
			toks = append(toks, token{tokVariable, sql[start:i]})
			continue
		case c == '$' || c == '@' || c == ':' || c == '#':
			if generic {
				i++
				for i < len(sql) && isIDChar(sql[i]) {
					i++
				}
				kind := tokVariable
				if i == start+1 {
					kind = tokPunct
				}
				toks = append(toks, token{kind, sql[start:i]})
				continue
			}
			n, ok := variableLen(sql[i:])
			if !ok {
				return nil, refuse("malformed parameter %q", sql[i:i+n])
			}
			i += n
			toks = append(toks, token{tokVariable, sql[start:i]})
			continue
		case isIDChar(c):
			for i < len(sql) && isIDChar(sql[i]) {
				i++
			}
			toks = append(toks, token{tokWord, sql[start:i]})
			continue
		}
		i++
		toks = append(toks, token{tokPunct, sql[start:i]})
	}
	return toks, nil
}

// quotedLen returns the length of the quoted token at the start of s, which
// begins with quote q; a doubled q stands for itself. ok is false when the
// token is unterminated.
func quotedLen(s string, q byte) (n int, ok bool) {
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			i++
			continue
		}
		return i + 1, true
	}
	return len(s), false
}

// quoteName names the token a quote byte opens.
func quoteName(q byte) string {
	if q == '\'' {
		return "string"
	}
	return "quoted identifier"
}

// numberLen returns the length of the numeric literal at the start of s:
// 0x hex digits, or digits and '_' separators with an optional fraction and
// exponent. It stops where SQLite's number ends, so a word glued to a number
// ("1INTO") is a token of its own and is checked like any other word.
func numberLen(s string) int {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHex(s[2]) {
		i := 2
		for i < len(s) && isHex(s[i]) {
			i++
		}
		return i
	}
	i := 0
	digits := func() {
		for i < len(s) && (isDigit(s[i]) || s[i] == '_') {
			i++
		}
	}
	digits()
	if i < len(s) && s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			i = j
			digits()
		}
	}
	return i
}

// variableLen returns the length of the SQLite parameter at the start of s,
// which begins with '$', '@', ':' or '#': identifier characters, where "::"
// may appear and a "(…)" suffix (up to white space or ')') ends it, as in
// SQLite's Tcl variables. ok is false when SQLite rejects the token: no
// identifier character, or an unclosed "(".
func variableLen(s string) (n int, ok bool) {
	names := 0
	i := 1
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case isIDChar(c):
			names++
		case c == '(' && names > 0:
			for i++; i < len(s) && !isSpace(s[i]) && s[i] != ')'; i++ {
			}
			if i < len(s) && s[i] == ')' {
				return i + 1, true
			}
			return i, false
		case c == ':' && i+1 < len(s) && s[i+1] == ':':
			i++
		default:
			return i, names > 0
		}
	}
	return i, names > 0
}

// isSpace reports whether c is white space to SQLite: ' ' and \t \n \v \f \r.
func isSpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// isIDChar reports whether c may appear in a bare identifier, as SQLite's
// IdChar: letters, digits, '_', '$' and every byte of a multi-byte UTF-8
// sequence.
func isIDChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '$' || c >= 0x80
}
