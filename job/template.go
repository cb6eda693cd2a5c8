package job

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Template is a parsed task template: literal text with {field} placeholders.
//
// A Template is immutable after [ParseTemplate] returns it and is safe for
// concurrent use by multiple goroutines. The zero Template has no parts and
// renders as the empty string.
type Template struct {
	parts  []part
	fields []string // distinct top-level names, in order of first use
}

// part is either literal text (path == nil) or a field reference.
type part struct {
	lit  string   // literal text with "{{" and "}}" already unescaped
	path []string // field name, then the segments below it
	name string   // the dotted name as written, for errors
}

// TemplateSyntaxError reports a malformed template.
type TemplateSyntaxError struct {
	Offset int    // 0-based byte offset of the problem in the template text
	Line   int    // 1-based line
	Col    int    // 1-based column, counted in characters (runes)
	Msg    string // what is wrong, e.g. `unclosed "{"`
}

// Error returns the message with its position, e.g.
// `template: line 1, col 7: unclosed "{"`.
func (e *TemplateSyntaxError) Error() string {
	return fmt.Sprintf("template: line %d, col %d: %s", e.Line, e.Col, e.Msg)
}

// MissingFieldError reports that an input lacks a field the template refers to.
type MissingFieldError struct {
	Field string // dotted name as written in the template, e.g. "user.name"
}

// Error returns `template: input has no field "user.name"`.
func (e *MissingFieldError) Error() string {
	return fmt.Sprintf("template: input has no field %q", e.Field)
}

// ParseTemplate parses text into a [Template].
//
// A placeholder is {name}, where name is a field name matching
// [A-Za-z_][A-Za-z0-9_-]*, optionally followed by "."-separated segments
// ([A-Za-z0-9_-]+) that reach into nested objects ({user.name}) or, with a
// decimal segment, into arrays ({tags.0}). "{{" and "}}" stand for literal
// braces; nothing else is special.
//
// An unclosed "{", a lone "}", an empty placeholder or an invalid name is
// reported as a *[TemplateSyntaxError] giving the position of the problem.
func ParseTemplate(text string) (*Template, error) {
	t := &Template{}
	var lit []byte // pending literal text, unescaped
	flush := func() {
		if len(lit) > 0 {
			t.parts = append(t.parts, part{lit: string(lit)})
			lit = lit[:0]
		}
	}
	start := 0 // start of the raw literal run not yet copied to lit
	for i := 0; i < len(text); {
		switch text[i] {
		case '{':
			if i+1 < len(text) && text[i+1] == '{' {
				lit = append(lit, text[start:i+1]...)
				i += 2
				start = i
				continue
			}
			name, end, err := scanPlaceholder(text, i)
			if err != nil {
				return nil, err
			}
			lit = append(lit, text[start:i]...)
			flush()
			path := strings.Split(name, ".")
			t.parts = append(t.parts, part{path: path, name: name})
			if !slices.Contains(t.fields, path[0]) {
				t.fields = append(t.fields, path[0])
			}
			i = end
			start = i
		case '}':
			if i+1 < len(text) && text[i+1] == '}' {
				lit = append(lit, text[start:i+1]...)
				i += 2
				start = i
				continue
			}
			return nil, syntaxError(text, i, `unexpected "}" (write "}}" for a literal brace)`)
		default:
			i++
		}
	}
	lit = append(lit, text[start:]...)
	flush()
	return t, nil
}

// scanPlaceholder parses the placeholder whose "{" is at text[open]. It
// returns the name and the offset just past the closing "}".
func scanPlaceholder(text string, open int) (name string, end int, err error) {
	j := open + 1
	for j < len(text) && (isNameByte(text[j]) || text[j] == '.') {
		j++
	}
	if j == len(text) || text[j] != '}' {
		// A "}" later on the same line, before any other "{", means the
		// placeholder holds a bad character; otherwise it was never closed.
		rest := text[j:]
		if k := strings.IndexAny(rest, "{}\n"); k < 0 || rest[k] != '}' {
			return "", 0, syntaxError(text, open, `unclosed "{" (write "{{" for a literal brace)`)
		}
		r, _ := utf8.DecodeRuneInString(rest)
		return "", 0, syntaxError(text, j, fmt.Sprintf("unexpected %q in placeholder (write \"{{\" for a literal brace)", r))
	}
	name = text[open+1 : j]
	if name == "" {
		return "", 0, syntaxError(text, open, `empty placeholder "{}"`)
	}
	if c := name[0]; !isLetter(c) {
		return "", 0, syntaxError(text, open+1,
			fmt.Sprintf("invalid placeholder {%s}: a field name must start with a letter or underscore", name))
	}
	for k := 0; k <= len(name); k++ {
		if k < len(name) && name[k] != '.' {
			continue
		}
		// name[k] is a "." or the end: the segment after a "." must not be empty.
		if k > 0 && name[k-1] == '.' {
			return "", 0, syntaxError(text, open+1+k,
				fmt.Sprintf("invalid placeholder {%s}: empty name segment", name))
		}
	}
	return name, j + 1, nil
}

func isLetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

func isNameByte(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '-'
}

func syntaxError(text string, off int, msg string) *TemplateSyntaxError {
	before := text[:off]
	lineStart := strings.LastIndexByte(before, '\n') + 1
	return &TemplateSyntaxError{
		Offset: off,
		Line:   strings.Count(before, "\n") + 1,
		Col:    utf8.RuneCountInString(before[lineStart:]) + 1,
		Msg:    msg,
	}
}

// Fields returns the distinct top-level field names the template refers to,
// in order of first use. For "{user.name} {id} {user.age}" it returns
// ["user" "id"]. The caller owns the returned slice.
func (t *Template) Fields() []string {
	return append([]string(nil), t.fields...)
}

// Render fills the placeholders from in and returns the text.
//
// Strings are inserted as they are; json.Number and other numbers as their
// decimal text; bools as true or false; nil as null; objects and arrays as
// compact JSON (with <, > and & left unescaped). Any other value is encoded
// as JSON, and inserted unquoted when that gives a JSON string (a named
// string type, a time.Time).
//
// A field absent from in, or a path that does not resolve (a segment below a
// non-object, an array index out of range), gives a *[MissingFieldError]. A
// value that cannot be encoded as JSON gives an error wrapping the encoder's.
func (t *Template) Render(in Input) (string, error) {
	switch len(t.parts) {
	case 0:
		return "", nil
	case 1:
		p := &t.parts[0]
		if p.path == nil {
			return p.lit, nil
		}
		if v, ok := p.lookup(in); ok {
			if s, ok := v.(string); ok {
				return s, nil
			}
		}
	}
	bp := bufPool.Get().(*[]byte)
	b, err := t.AppendRender((*bp)[:0], in)
	var s string
	if err == nil {
		s = string(b)
	}
	if cap(b) <= maxPooledBuf {
		*bp = b
		bufPool.Put(bp)
	}
	return s, err
}

// maxPooledBuf bounds the buffers that Render keeps for reuse, so that one
// huge rendering does not pin its memory.
const maxPooledBuf = 64 << 10

var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// AppendRender is like [Template.Render] but appends the text to dst and
// returns the extended slice. On error it returns dst truncated to its
// original length.
func (t *Template) AppendRender(dst []byte, in Input) ([]byte, error) {
	n := len(dst)
	for i := range t.parts {
		p := &t.parts[i]
		if p.path == nil {
			dst = append(dst, p.lit...)
			continue
		}
		v, ok := p.lookup(in)
		if !ok {
			return dst[:n], &MissingFieldError{Field: p.name}
		}
		if s, ok := v.(string); ok { // the common case, kept inline
			dst = append(dst, s...)
			continue
		}
		var err error
		if dst, err = appendValue(dst, v); err != nil {
			return dst[:n], fmt.Errorf("template: field %q: %w", p.name, err)
		}
	}
	return dst, nil
}

// lookup resolves the part's path in in.
func (p *part) lookup(in Input) (any, bool) {
	v, ok := in[p.path[0]]
	if !ok {
		return nil, false
	}
	for _, seg := range p.path[1:] {
		switch c := v.(type) {
		case map[string]any:
			v, ok = c[seg]
		case Input:
			v, ok = c[seg]
		case []any:
			i, isIndex := parseIndex(seg)
			ok = isIndex && i < len(c)
			if ok {
				v = c[i]
			}
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// parseIndex parses a decimal array index of digits only.
func parseIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// appendValue appends the text form of v, as documented on Render.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return append(dst, x...), nil
	case json.Number:
		return append(dst, x...), nil
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float64:
		return appendFloat(dst, x, 64), nil
	case float32:
		return appendFloat(dst, float64(x), 32), nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() { // named scalar types, unless they encode themselves
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if !implementsMarshaler(rv.Type()) {
			return appendScalar(dst, rv), nil
		}
	}
	return appendJSON(dst, v)
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func implementsMarshaler(t reflect.Type) bool {
	return t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType)
}

func appendScalar(dst []byte, rv reflect.Value) []byte {
	switch {
	case rv.CanInt():
		return strconv.AppendInt(dst, rv.Int(), 10)
	case rv.CanUint():
		return strconv.AppendUint(dst, rv.Uint(), 10)
	case rv.CanFloat():
		return appendFloat(dst, rv.Float(), rv.Type().Bits())
	default:
		return strconv.AppendBool(dst, rv.Bool())
	}
}

// appendFloat formats f as encoding/json does: plain decimal, or an
// exponent for very large or very small magnitudes. NaN and infinities,
// which JSON cannot carry, come out as NaN, +Inf and -Inf.
func appendFloat(dst []byte, f float64, bits int) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && !math.IsInf(f, 0) {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' { // clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendJSON appends v as compact JSON without HTML escaping. A value whose
// JSON form is a string is appended unquoted.
func appendJSON(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err == nil {
			return append(dst, s...), nil
		}
	}
	return append(dst, b...), nil
}
