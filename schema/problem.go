package schema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Problem is one violation of the schema by a JSON document.
type Problem struct {
	// Path locates the offending value: "$" is the whole document, then
	// ".name" or ["odd key"] for object members and "[index]" for array
	// elements, as in "$.items[0].name".
	Path string `json:"path"`
	// Message says what is wrong, as in `missing required property "name"`
	// or "got string, want integer".
	Message string `json:"message"`
}

// ValidationError reports every problem of one document. [Schema.Validate]
// and [Schema.Parse] return it with Problems sorted by path and then message.
type ValidationError struct {
	// Problems lists the violations; it is never empty when returned by this
	// package.
	Problems []Problem
	// Raw is the text that was validated: the document given to
	// [Schema.Validate] or the whole answer given to [Schema.Parse]. Callers
	// may truncate it.
	Raw string
}

// Error lists every problem as "path: message", separated by "; ", in order
// of path and then message.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("output does not match schema")
	for i, p := range sortedProblems(e.Problems) {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.Path)
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// Feedback renders a validation failure as the message sent back to the
// model for a retry: one "- path: message" line per problem, in order of path
// and then message, and a request for the corrected JSON only. The text
// depends only on err.Problems. A nil err gives the request alone.
func Feedback(err *ValidationError) string {
	var problems []Problem
	if err != nil {
		problems = sortedProblems(err.Problems)
	}
	var b strings.Builder
	b.WriteString("Your answer does not match the required JSON Schema.")
	if len(problems) > 0 {
		b.WriteString(" Problems:\n")
		for _, p := range problems {
			b.WriteString("- ")
			b.WriteString(p.Path)
			b.WriteString(": ")
			b.WriteString(oneLine(p.Message))
			b.WriteByte('\n')
		}
	} else {
		b.WriteByte('\n')
	}
	b.WriteString("Reply with the corrected JSON value only: no explanations before or after it, and no Markdown code fences.")
	return b.String()
}

// oneLine keeps a message on its line of the feedback.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func compareProblems(a, b Problem) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Message, b.Message))
}

// sortedProblems returns ps in order of path and message, copying it only if
// it is not sorted already.
func sortedProblems(ps []Problem) []Problem {
	if slices.IsSortedFunc(ps, compareProblems) {
		return ps
	}
	ps = slices.Clone(ps)
	slices.SortFunc(ps, compareProblems)
	return ps
}

// problemsOf flattens the validator's error tree into leaf problems, sorted
// and without duplicates. root is the validated value, used to tell array
// indexes from object member names in paths.
func problemsOf(verr *jsonschema.ValidationError, root any) []Problem {
	c := collector{root: root}
	c.walk(verr, "")
	if len(c.out) == 0 {
		// A failure without leaves: report it as it is.
		c.out = append(c.out, Problem{Path: c.path(verr.InstanceLocation), Message: localized(verr.ErrorKind)})
	}
	slices.SortFunc(c.out, compareProblems)
	return slices.Compact(c.out)
}

type collector struct {
	root any
	out  []Problem
}

func (c *collector) add(loc []string, msg, note string) {
	c.out = append(c.out, Problem{Path: c.path(loc), Message: msg + note})
}

// walk adds the leaf problems under e. note is appended to each message to
// say which alternative of an anyOf or oneOf it belongs to.
func (c *collector) walk(e *jsonschema.ValidationError, note string) {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		// Containers: the problems are their causes.
		if len(e.Causes) == 0 {
			c.add(loc, localized(k), note)
		}
		for _, cause := range e.Causes {
			c.walk(cause, note)
		}
	case *kind.AnyOf:
		c.alternatives(e, "anyOf", note)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			c.alternatives(e, "oneOf", note)
			return
		}
		c.add(loc, fmt.Sprintf("value matches oneOf options %d and %d, want exactly one",
			k.Subschemas[0]+1, k.Subschemas[1]+1), note)
	case *kind.Required:
		for _, p := range k.Missing {
			c.add(loc, "missing required property "+quote(p), note)
		}
	case *kind.DependentRequired:
		for _, p := range k.Missing {
			c.add(loc, fmt.Sprintf("missing property %s, required when %s is present", quote(p), quote(k.Prop)), note)
		}
	case *kind.Dependency:
		for _, p := range k.Missing {
			c.add(loc, fmt.Sprintf("missing property %s, required when %s is present", quote(p), quote(k.Prop)), note)
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			c.add(loc, fmt.Sprintf("property %s is not allowed", quote(p)), note)
		}
	case *kind.PropertyNames:
		msg := "invalid property name " + quote(k.Property)
		var sub collector
		for _, cause := range e.Causes {
			sub.walk(cause, "")
		}
		if len(sub.out) > 0 {
			msgs := make([]string, len(sub.out))
			for i, p := range sub.out {
				msgs[i] = p.Message
			}
			slices.Sort(msgs)
			msg += ": " + strings.Join(slices.Compact(msgs), "; ")
		}
		c.add(loc, msg, note)
	default:
		// Leaves. The causes of contains, minContains and contentSchema
		// failures are not actionable one by one.
		c.add(loc, leafMessage(k), note)
	}
}

// alternatives adds the problems of a failed anyOf or oneOf whose options all
// failed. When each option failed only on the type of the same value, they are
// merged into one "got X, want A or B" problem; otherwise each option's
// problems are listed with a note naming the option.
func (c *collector) alternatives(e *jsonschema.ValidationError, keyword, note string) {
	if len(e.Causes) == 0 {
		c.add(e.InstanceLocation, "value matches none of the "+keyword+" options", note)
		return
	}
	if got, want, ok := typeOnly(e); ok {
		c.add(e.InstanceLocation, "got "+got+", want "+strings.Join(want, " or "), note)
		return
	}
	for i, cause := range e.Causes {
		// Every option failed, so the i-th cause is the i-th option.
		n := fmt.Sprintf("%s option %d", keyword, i+1)
		if note == "" {
			n = " (" + n + ")"
		} else {
			n = note[:len(note)-1] + ", " + n + ")"
		}
		c.walk(cause, n)
	}
}

// typeOnly reports whether every option of the failed anyOf or oneOf e failed
// only on its type keyword at e's location, and if so the type found and the
// types wanted.
func typeOnly(e *jsonschema.ValidationError) (got string, want []string, ok bool) {
	here := e.InstanceLocation
	for _, cause := range e.Causes {
		// Skip through references and single-cause groups.
		for len(cause.Causes) == 1 {
			switch cause.ErrorKind.(type) {
			case *kind.Reference, *kind.Group, *kind.AllOf:
				cause = cause.Causes[0]
				continue
			}
			break
		}
		t, isType := cause.ErrorKind.(*kind.Type)
		if !isType || !slices.Equal(cause.InstanceLocation, here) {
			return "", nil, false
		}
		got = t.Got
		for _, w := range t.Want {
			if !slices.Contains(want, w) {
				want = append(want, w)
			}
		}
	}
	return got, want, true
}

// path formats an instance location as "$.a[0].b". A numeric token is an
// array index when the value it indexes is an array.
func (c *collector) path(loc []string) string {
	if len(loc) == 0 {
		return "$"
	}
	var b strings.Builder
	b.WriteByte('$')
	v := c.root
	for _, tok := range loc {
		switch x := v.(type) {
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(x) {
				b.WriteByte('[')
				b.WriteString(tok)
				b.WriteByte(']')
				v = x[i]
				continue
			}
			v = nil
		case map[string]any:
			v = x[tok]
		default:
			v = nil
		}
		if isIdentifier(tok) {
			b.WriteByte('.')
			b.WriteString(tok)
		} else {
			b.WriteByte('[')
			b.WriteString(quote(tok))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// isIdentifier reports whether a member name can follow a dot in a path.
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// printer renders the validator's own messages for kinds without a message
// here. Printers are safe for concurrent use.
var printer = message.NewPrinter(language.English)

func localized(k jsonschema.ErrorKind) string {
	return k.LocalizedString(printer)
}

// leafMessage says what a leaf failure means, in words a model can act on.
func leafMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return "got " + k.Got + ", want " + strings.Join(k.Want, " or ")
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		if len(want) == 1 {
			return "value must be " + want[0] + ", got " + display(k.Got)
		}
		return "value must be one of " + strings.Join(want, ", ") + "; got " + display(k.Got)
	case *kind.Const:
		return "value must be " + display(k.Want) + ", got " + display(k.Got)
	case *kind.Format:
		return fmt.Sprintf("%s is not a valid %s: %v", display(k.Got), k.Want, k.Err)
	case *kind.MinLength:
		return fmt.Sprintf("string is too short: %s, want at least %d", plural(k.Got, "character"), k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("string is too long: %s, want at most %d", plural(k.Got, "character"), k.Want)
	case *kind.Pattern:
		return fmt.Sprintf("string %s does not match pattern %s", display(k.Got), quote(k.Want))
	case *kind.Minimum:
		return fmt.Sprintf("must be >= %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be <= %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MinItems:
		return fmt.Sprintf("array has %s, want at least %d", plural(k.Got, "item"), k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("array has %s, want at most %d", plural(k.Got, "item"), k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("object has %s, want at least %d", properties(k.Got), k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("object has %s, want at most %d", properties(k.Got), k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("items [%d] and [%d] are equal, want unique items", k.Duplicates[0], k.Duplicates[1])
	case *kind.AdditionalItems:
		return fmt.Sprintf("%d extra items are not allowed", k.Count)
	case *kind.Contains:
		return `no item matches the "contains" schema`
	case *kind.MinContains:
		return fmt.Sprintf(`%s the "contains" schema, want at least %d`, matching(len(k.Got)), k.Want)
	case *kind.MaxContains:
		return fmt.Sprintf(`%s the "contains" schema, want at most %d`, matching(len(k.Got)), k.Want)
	case *kind.Not:
		return `value must not match the "not" schema`
	case *kind.FalseSchema:
		return "no value is allowed here"
	default:
		return localized(k)
	}
}

// plural writes a count of things: "1 item", "2 items".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

func properties(n int) string {
	if n == 1 {
		return "1 property"
	}
	return strconv.Itoa(n) + " properties"
}

// matching writes how many items match: "1 item matches", "2 items match".
func matching(n int) string {
	if n == 1 {
		return "1 item matches"
	}
	return strconv.Itoa(n) + " items match"
}

// maxDisplay bounds the length of a value quoted in a message.
const maxDisplay = 80

// display renders a JSON value for a message: as JSON, cut short when long.
func display(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if len(s) <= maxDisplay {
		return s
	}
	cut := maxDisplay - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quote renders a name as a JSON string.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// ratString renders a number as it would be written in JSON.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
