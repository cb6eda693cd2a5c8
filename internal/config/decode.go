package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the nodes a decoder visits, counting every expansion of an
// alias, so that a small file cannot make Parse do unbounded work.
const maxNodes = 100_000

// timeDurationType is the type of the durations of the engine's types,
// written in the file as Duration is.
var timeDurationType = reflect.TypeFor[time.Duration]()

// A decoder walks a yaml.Node tree against a Go type, filling the value and
// recording every problem it meets. It is used by one goroutine.
type decoder struct {
	dir      string // absolute directory of the job file
	problems []Problem
	// nodes maps the path of every value visited to its node (aliases
	// resolved), for the positions of semantic problems.
	nodes map[string]*yaml.Node
	// bad holds the paths whose values could not be decoded; semantic checks
	// skip them and everything below them.
	bad map[string]bool
	// expanding counts the walks under way through each node, to catch
	// aliases that refer to a value containing them.
	expanding map[*yaml.Node]int
	visits    int
}

func newDecoder(dir string) *decoder {
	return &decoder{
		dir:       dir,
		nodes:     make(map[string]*yaml.Node),
		bad:       make(map[string]bool),
		expanding: make(map[*yaml.Node]int),
	}
}

func (d *decoder) add(p Problem) { d.problems = append(d.problems, p) }

// problem records a problem at node n and marks path as undecodable.
func (d *decoder) problem(n *yaml.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.report(n, path, format, args...)
}

// report records a problem at node n.
func (d *decoder) report(n *yaml.Node, path, format string, args ...any) {
	d.add(Problem{Line: n.Line, Col: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// visit counts n against maxNodes and reports whether the walk may go on.
func (d *decoder) visit(n *yaml.Node, path string, count int) bool {
	if d.visits > maxNodes {
		return false
	}
	d.visits += count
	if d.visits > maxNodes {
		d.problem(n, path, "document is too large (more than %d nodes after expanding aliases)", maxNodes)
		return false
	}
	return true
}

// follow calls fn with n, or with the node n refers to when n is an alias,
// guarding against aliases to a value that contains them.
func (d *decoder) follow(n *yaml.Node, path string, fn func(*yaml.Node)) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || d.expanding[n.Alias] > 0 {
			d.problem(n, path, "alias *%s refers to a value that contains it", n.Value)
			return
		}
		n = n.Alias
	}
	d.expanding[n]++
	fn(n)
	d.expanding[n]--
}

// scalar decodes the scalar n into v with yaml.v3.
func (d *decoder) scalar(n *yaml.Node, path string, v reflect.Value) {
	t := v.Type()
	if n.Kind != yaml.ScalarNode {
		d.problem(n, path, "expected %s, got %s", want(t), describe(n))
		return
	}
	// yaml.v3 truncates floats into integer fields; refuse them instead.
	if isInt(t.Kind()) && t != timeDurationType && n.ShortTag() == "!!float" {
		d.problem(n, path, "expected an integer, got %s", describe(n))
		return
	}
	p := reflect.New(t)
	if err := n.Decode(p.Interface()); err != nil {
		d.problem(n, path, "%s", decodeMsg(err))
		return
	}
	v.Set(p.Elem())
}

// sequence decodes the sequence n into the slice v.
func (d *decoder) sequence(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.problem(n, path, "expected a list, got %s", describe(n))
		return
	}
	if len(n.Content) == 0 {
		return // keep nil: an empty list means none
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.into(item, fmt.Sprintf("%s[%d]", path, i), s.Index(i).Addr().Interface())
	}
	v.Set(s)
}

// An entry is one key and value of a mapping.
type entry struct{ key, value *yaml.Node }

// entries returns the entries of the mapping n in order, with the entries
// of merge keys ("<<") after them, and records duplicate and non-scalar
// keys. As in YAML, a key of n overrides a merged one, and an earlier
// merged mapping overrides a later one.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	if !d.visit(n, path, len(n.Content)/2) {
		return nil
	}
	var (
		out    []entry
		seen   = make(map[string]*yaml.Node)
		merges []*yaml.Node
	)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
			merges = append(merges, val)
		case k.Kind != yaml.ScalarNode:
			d.report(k, path, "mapping key must be a string, got %s", describe(k))
		case seen[k.Value] != nil:
			d.report(k, join(path, k.Value), "duplicate key %s (first at line %d)", quote(k.Value), seen[k.Value].Line)
		default:
			seen[k.Value] = k
			out = append(out, entry{k, val})
		}
	}
	merge := func(m *yaml.Node) {
		if m.Kind != yaml.MappingNode {
			d.report(m, path, "merge key value must be a mapping or a list of mappings, got %s", describe(m))
			return
		}
		for _, e := range d.entries(m, path) {
			if seen[e.key.Value] == nil {
				seen[e.key.Value] = e.key
				out = append(out, e)
			}
		}
	}
	for _, m := range merges {
		d.follow(m, path, func(m *yaml.Node) {
			if m.Kind != yaml.SequenceNode {
				merge(m)
				return
			}
			for _, item := range m.Content {
				d.follow(item, path, merge)
			}
		})
	}
	return out
}

// join appends key to a YAML path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// want describes what a value of type t is written as.
func want(t reflect.Type) string {
	switch {
	case t == timeDurationType:
		return `a duration like "30s"`
	case isInt(t.Kind()):
		return "an integer"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// describe says what n is, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "alias *" + n.Value
	case yaml.DocumentNode:
		return "a document"
	}
	if n.ShortTag() == "!!str" {
		return quote(n.Value)
	}
	return shorten(n.Value)
}

// quote quotes s for a message, shortening it when it is long.
func quote(s string) string { return strconv.Quote(shorten(s)) }

func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-3]) + "..."
}

// decodeLine matches the position prefix of yaml.v3's messages.
var decodeLine = regexp.MustCompile(`(?m)^(?:yaml: )?line \d+: `)

// decodeMsg returns the message of an error of yaml.Node.Decode without the
// "yaml:" and line prefixes, which the problem carries already.
func decodeMsg(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = decodeLine.ReplaceAllString(m, "")
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(decodeLine.ReplaceAllString(err.Error(), ""), "yaml: ")
}
