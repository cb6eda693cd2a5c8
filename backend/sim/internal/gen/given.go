package gen

import (
	"bytes"
	"encoding/json"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Given is what generated values may be taken from, the way a real model
// copies a path or an ID from its task into a tool's arguments: the fields
// of the agent's input (the row its task was rendered from) and the task's
// text, whose "name: value" and "name=value" pairs and embedded JSON
// objects are fields too. A nil *Given gives nothing.
//
// A named value of the schema (an object's property) takes the value of
// the field that matches it best, first by its name — the same name, the
// same name in another case, the same words in another spelling
// (file_path, filePath, file-path) — then by its description, when that
// mentions the field ("the file to read" mentions file). Among fields that
// match alike, the input's come first, in key order, then the task's, in
// the order written; a description's earliest mention wins. A value is
// taken only when it fits the property's type (and enum): otherwise the
// property is generated as if nothing were given.
//
// A Given is used by one call at a time: it parses the task once, on first
// use.
type Given struct {
	// Input is the agent's input; nil means none.
	Input map[string]any
	// Task is the agent's task, as the model reads it; empty means none.
	Task string

	fields []field // Input's fields, then Task's; built on first use
	built  bool
}

// field is one field a value may be taken from.
type field struct {
	name  string
	norm  string   // lower case without separators: "filepath"
	words []string // lower-case words of the name: "file", "path"
	value any      // a string, float64, json.Number, int, int64 or bool
}

// maxTaskObjects bounds the JSON objects looked for in a task: each '{' is
// an attempt to decode one.
const maxTaskObjects = 8

// all returns the fields of gv, building them on first use.
func (gv *Given) all() []field {
	if gv.built {
		return gv.fields
	}
	gv.built = true
	seen := make(map[string]bool, len(gv.Input))
	for _, k := range slices.Sorted(maps.Keys(gv.Input)) {
		gv.fields = append(gv.fields, newField(k, gv.Input[k]))
		seen[k] = true
	}
	add := func(k string, v any) {
		if !seen[k] {
			seen[k] = true
			gv.fields = append(gv.fields, newField(k, v))
		}
	}
	textFields(gv.Task, add)
	return gv.fields
}

func newField(name string, v any) field {
	words := nameWords(name)
	return field{name: name, norm: strings.Join(words, ""), words: words, value: v}
}

// nameWords splits a name into its lower-case words: at any byte that is
// not a letter or digit, and where a lower-case letter or digit is
// followed by an upper-case one (filePath, HTTPServer is one word).
func nameWords(name string) []string {
	var words []string
	start := -1
	var prev rune
	for i, c := range name {
		letter := unicode.IsLetter(c) || unicode.IsDigit(c)
		switch {
		case !letter:
			if start >= 0 {
				words = append(words, strings.ToLower(name[start:i]))
				start = -1
			}
		case start < 0:
			start = i
		case unicode.IsUpper(c) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			words = append(words, strings.ToLower(name[start:i]))
			start = i
		}
		prev = c
	}
	if start >= 0 {
		words = append(words, strings.ToLower(name[start:]))
	}
	return words
}

// textFields calls add with the fields written in text: each "name: value"
// or "name=value" (name a word; value up to the next space, or quoted;
// the first of a name wins) and the members of the JSON objects embedded
// in it, in the order written.
func textFields(text string, add func(string, any)) {
	objects := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '{' && objects < maxTaskObjects {
			objects++
			if n := embeddedObject(text[i:], add); n > 0 {
				i += n - 1
			}
			continue
		}
		if !isWordByte(c) || i > 0 && isWordByte(text[i-1]) {
			continue
		}
		end := i
		for end < len(text) && isWordByte(text[end]) {
			end++
		}
		if end < len(text) && (text[end] == ':' || text[end] == '=') {
			if v, ok := fieldValue(text[end+1:]); ok {
				add(text[i:end], v)
			}
		}
		i = end - 1
	}
}

// embeddedObject adds the members of the JSON object text starts with, in
// key order, and returns its length; 0 when text does not start with one.
func embeddedObject(text string, add func(string, any)) int {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil || obj == nil {
		return 0
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		add(k, obj[k])
	}
	return int(d.InputOffset())
}

// fieldValue reads the value after a field's ':' or '=': a quoted string
// whole, else the text up to the next space, without the punctuation that
// ends a sentence. A value on the next line is no value.
func fieldValue(rest string) (string, bool) {
	rest = strings.TrimLeft(rest, " \t")
	if rest != "" && (rest[0] == '"' || rest[0] == '\'' || rest[0] == '`') {
		if end := strings.IndexByte(rest[1:], rest[0]); end > 0 && !strings.ContainsAny(rest[1:1+end], "\r\n") {
			return rest[1 : 1+end], true
		}
	}
	if k := strings.IndexAny(rest, " \t\r\n"); k >= 0 {
		rest = rest[:k]
	}
	rest = strings.TrimRight(strings.Trim(rest, "\"'`"), ".,;")
	rest = strings.Trim(rest, "\"'`")
	return rest, rest != ""
}

// lookup returns the values of the fields that match the property p, the
// best first (see [Given]).
func (gv *Given) lookup(p *prop) iter.Seq[any] {
	return func(yield func(any) bool) { gv.matches(p, yield) }
}

func (gv *Given) matches(p *prop, yield func(any) bool) {
	fields := gv.all()
	if len(fields) == 0 {
		return
	}
	// By name: the same, in another case, in other words.
	for _, same := range []func(f *field) bool{
		func(f *field) bool { return f.name == p.name },
		func(f *field) bool { return f.name != p.name && strings.EqualFold(f.name, p.name) },
		func(f *field) bool { return !strings.EqualFold(f.name, p.name) && f.norm != "" && f.norm == p.norm },
	} {
		for i := range fields {
			if same(&fields[i]) && !yield(fields[i].value) {
				return
			}
		}
	}
	if len(p.desc) == 0 {
		return
	}
	// By description: the fields it mentions, the earliest first.
	type mention struct{ at, field int }
	var ms []mention
	for i := range fields {
		if f := &fields[i]; f.norm != p.norm {
			if at := mentions(p.desc, f); at >= 0 {
				ms = append(ms, mention{at, i})
			}
		}
	}
	slices.SortStableFunc(ms, func(a, b mention) int { return a.at - b.at })
	for _, m := range ms {
		if !yield(fields[m.field].value) {
			return
		}
	}
}

// mentions returns where desc, a description's words, mentions f: its
// words in a row, or its name run together as one word; -1 if nowhere.
func mentions(desc []string, f *field) int {
	if len(f.words) == 0 {
		return -1
	}
	for i := range desc {
		if desc[i] == f.norm {
			return i
		}
		if i+len(f.words) <= len(desc) && slices.Equal(desc[i:i+len(f.words)], f.words) {
			return i
		}
	}
	return -1
}

// descWords splits a description into its lower-case words.
func descWords(desc string) []string {
	var words []string
	for w := range strings.FieldsFuncSeq(desc, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }) {
		words = append(words, strings.ToLower(w))
	}
	return words
}

// appendGiven appends v as a value of g, if it is one: it fits g's type,
// and is one of g's enum or const values when g has them.
func (g *Generator) appendGiven(buf []byte, v any) ([]byte, bool) {
	text, ok := g.givenText(v)
	if !ok {
		return buf, false
	}
	if len(g.fixed) > 0 && !slices.ContainsFunc(g.fixed, func(f []byte) bool { return bytes.Equal(f, text) }) {
		return buf, false
	}
	return append(buf, text...), true
}

// givenText returns v as the JSON text of a value of g's type.
func (g *Generator) givenText(v any) ([]byte, bool) {
	s, isString := v.(string)
	switch g.kind {
	case kindString, kindAny:
		if !isString {
			n, ok := scalarText(v)
			if !ok {
				return nil, false
			}
			s = n
		}
		if !utf8.ValidString(s) {
			return nil, false
		}
		return AppendJSONString(nil, s), true
	case kindInteger, kindNumber:
		f, ok := number(v)
		if !ok || !g.inRange(f) || g.multipleOf != 0 {
			return nil, false
		}
		if g.kind == kindInteger {
			if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return nil, false
			}
			return strconv.AppendInt(nil, int64(f), 10), true
		}
		return strconv.AppendFloat(nil, f, 'g', -1, 64), true
	case kindBoolean:
		switch v {
		case true, "true":
			return []byte("true"), true
		case false, "false":
			return []byte("false"), true
		}
	}
	return nil, false
}

// scalarText returns a number or boolean as text.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case json.Number:
		return v.String(), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// number returns v as a number: a number, or a string that is one.
func number(v any) (float64, bool) {
	var s string
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case json.Number:
		s = v.String()
	case string:
		s = v
	default:
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
