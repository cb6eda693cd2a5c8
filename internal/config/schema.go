package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// schema decodes output_schema: an inline mapping converted to JSON, or the
// path of a schema file, which it reads.
func (d *decoder) schema(n *yaml.Node, path string, s *schemaSource) {
	switch {
	case n.Kind == yaml.MappingNode:
		var buf bytes.Buffer
		before := len(d.problems)
		d.json(&buf, n, path)
		if len(d.problems) > before {
			d.bad[path] = true
			return
		}
		s.JSON = buf.Bytes()
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		if strings.TrimSpace(n.Value) == "" {
			d.problem(n, path, "schema file path must not be empty")
			return
		}
		s.File = d.resolve(n.Value)
		js, msgs := readSchemaFile(s.File)
		for _, m := range msgs {
			d.problem(n, path, "%s", m)
		}
		s.JSON = js
	default:
		d.problem(n, path, "expected an inline schema (a mapping) or a schema file path, got %s", describe(n))
	}
}

// readSchemaFile reads a schema file: JSON when its name ends in .json, YAML
// otherwise. It returns the schema as compact JSON, or the problems found.
func readSchemaFile(file string) (json.RawMessage, []string) {
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, []string{fmt.Sprintf("schema file %s does not exist", file)}
	case err != nil:
		return nil, []string{fmt.Sprintf("cannot read schema file: %v", err)}
	}
	if strings.EqualFold(filepath.Ext(file), ".json") {
		// Unmarshal reports where the JSON breaks; Compact does not.
		var raw json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line, col := position(data, se.Offset-1)
				return nil, []string{fmt.Sprintf("schema file %s:%d:%d: invalid JSON: %v", file, line, col, err)}
			}
			return nil, []string{fmt.Sprintf("schema file %s: invalid JSON: %v", file, err)}
		}
		if raw[0] != '{' {
			return nil, []string{fmt.Sprintf("schema file %s must hold a JSON object", file)}
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, []string{fmt.Sprintf("schema file %s: invalid JSON: %v", file, err)}
		}
		return buf.Bytes(), nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := syntaxError(err)
		if line > 0 {
			return nil, []string{fmt.Sprintf("schema file %s:%d: invalid YAML: %s", file, line, msg)}
		}
		return nil, []string{fmt.Sprintf("schema file %s: invalid YAML: %s", file, msg)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if isNull(root) {
		return nil, []string{fmt.Sprintf("schema file %s is empty", file)}
	}
	if root.Kind != yaml.MappingNode {
		return nil, []string{fmt.Sprintf("schema file %s must hold a mapping, got %s", file, describe(root))}
	}
	sub := newDecoder(filepath.Dir(file))
	var buf bytes.Buffer
	sub.json(&buf, root, "")
	if len(sub.problems) == 0 {
		return buf.Bytes(), nil
	}
	ps := newError(file, sub.problems).Problems
	msgs := make([]string, len(ps))
	for i, p := range ps {
		where := ""
		if p.Path != "" {
			where = p.Path + ": "
		}
		msgs[i] = fmt.Sprintf("schema file %s:%d:%d: %s%s", file, p.Line, p.Col, where, p.Msg)
	}
	return nil, msgs
}

// position returns the 1-based line and column of the byte at offset off in
// data.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// json writes the YAML value n to buf as JSON, recording what JSON cannot
// hold: non-string keys and infinite or NaN numbers.
func (d *decoder) json(buf *bytes.Buffer, n *yaml.Node, path string) {
	if !d.visit(n, path, 1) {
		return
	}
	d.follow(n, path, func(n *yaml.Node) {
		switch n.Kind {
		case yaml.MappingNode:
			buf.WriteByte('{')
			first := true
			for _, e := range d.entries(n, path) {
				if e.key.ShortTag() != "!!str" {
					d.report(e.key, path, "schema keys must be strings, got %s (quote it)", describe(e.key))
					continue
				}
				if !first {
					buf.WriteByte(',')
				}
				first = false
				writeString(buf, e.key.Value)
				buf.WriteByte(':')
				d.json(buf, e.value, join(path, e.key.Value))
			}
			buf.WriteByte('}')
		case yaml.SequenceNode:
			buf.WriteByte('[')
			for i, item := range n.Content {
				if i > 0 {
					buf.WriteByte(',')
				}
				d.json(buf, item, fmt.Sprintf("%s[%d]", path, i))
			}
			buf.WriteByte(']')
		case yaml.ScalarNode:
			d.jsonScalar(buf, n, path)
		default:
			d.report(n, path, "unexpected %s", describe(n))
		}
	})
}

// jsonScalar writes the scalar n as JSON: YAML null, booleans, integers and
// floats as their JSON counterparts, everything else as a string.
func (d *decoder) jsonScalar(buf *bytes.Buffer, n *yaml.Node, path string) {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			d.report(n, path, "%s", decodeMsg(err))
			return
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		var v any // int, int64 or uint64: integers stay integers
		if err := n.Decode(&v); err != nil {
			d.report(n, path, "%s", decodeMsg(err))
			return
		}
		js, err := json.Marshal(v)
		if err != nil {
			d.report(n, path, "cannot write %s as JSON: %v", describe(n), err)
			return
		}
		buf.Write(js)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			d.report(n, path, "%s", decodeMsg(err))
			return
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			d.report(n, path, "%s cannot be written as JSON", describe(n))
			return
		}
		js, _ := json.Marshal(f) // finite floats always marshal
		buf.Write(js)
	default:
		writeString(buf, n.Value)
	}
}

// writeString writes s as a JSON string, without escaping HTML characters.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // strings always encode; writes to a bytes.Buffer do not fail
	buf.Truncate(buf.Len() - 1) // the newline Encode adds
}

// resolve makes p absolute, relative to the job file's directory.
func (d *decoder) resolve(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(d.dir, p)
}
