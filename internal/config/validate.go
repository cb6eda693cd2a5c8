package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// toolSpec says which options a built-in tool takes.
type toolSpec struct {
	roots    bool // takes roots, and requires at least one
	maxBytes bool // takes max_bytes
}

// builtinTools are the tools a job file may name.
var builtinTools = map[string]toolSpec{
	"read_file": {roots: true, maxBytes: true},
}

// validate checks the meaning of a decoded job, resolves its paths and fills
// in defaults. It skips values that failed to decode, so that each mistake
// is reported once. root is the root mapping of the file.
func (d *decoder) validate(j *Job, root *yaml.Node) {
	if d.ok("task") {
		switch n := d.nodes["task"]; {
		case n == nil:
			d.report(root, "task", "required key is missing")
		case strings.TrimSpace(j.Task) == "":
			d.report(n, "task", "must not be empty")
		default:
			if err := checkTemplate(j.Task); err != nil {
				d.report(n, "task", "invalid template: %v", err)
			}
		}
	}

	if j.Backend == "" {
		j.Backend = DefaultBackend
	} else if d.ok("backend") {
		if u, err := url.Parse(j.Backend); err != nil {
			d.report(d.at("backend"), "backend", "invalid backend URL: %v", errors.Unwrap(err))
		} else if u.Scheme == "" {
			d.report(d.at("backend"), "backend", "backend URL %s has no scheme (for example \"sim://\" or \"openai://\")", quote(j.Backend))
		}
	}

	if j.Inputs != "" {
		j.Inputs = d.resolve(j.Inputs)
	}
	if j.Output != "" {
		j.Output = d.resolve(j.Output)
	}

	d.validateLimits(&j.Limits)
	d.validateTools(j.Tools)
}

func (d *decoder) validateLimits(l *Limits) {
	for _, f := range []struct {
		path string
		v    int64
	}{
		{"limits.max_turns", int64(l.MaxTurns)},
		{"limits.max_inflight", int64(l.MaxInflight)},
		{"limits.max_active", int64(l.MaxActive)},
		{"limits.max_retries", int64(derefInt(l.MaxRetries))},
		{"limits.rpm", int64(l.RPM)},
		{"limits.tpm", int64(l.TPM)},
	} {
		if f.v < 0 && d.ok(f.path) {
			d.report(d.at(f.path), f.path, "must not be negative, got %d", f.v)
		}
	}
	if l.MaxQueued < -1 && d.ok("limits.max_queued") {
		d.report(d.at("limits.max_queued"), "limits.max_queued", "must be -1 (probe off) or more, got %d", l.MaxQueued)
	}
	if l.Timeout < 0 && d.ok("limits.timeout") {
		d.report(d.at("limits.timeout"), "limits.timeout", "must not be negative, got %s", l.Timeout)
	}
}

func (d *decoder) validateTools(tools []Tool) {
	seen := make(map[string]*yaml.Node)
	for i := range tools {
		t := &tools[i]
		path := fmt.Sprintf("tools[%d]", i)
		if !d.ok(path) {
			continue
		}
		// Roots are paths: resolve them whatever the tool.
		for k, r := range t.Roots {
			if r != "" {
				t.Roots[k] = d.resolve(r)
			}
		}

		namePath := path + ".name"
		if !d.ok(namePath) {
			continue
		}
		if t.Name == "" {
			if d.nodes[namePath] == nil {
				d.report(d.at(namePath), namePath, "required key is missing")
			} else {
				d.report(d.at(namePath), namePath, "must not be empty")
			}
			continue
		}
		spec, known := d.tools[t.Name]
		if !known {
			d.report(d.at(namePath), namePath, "%s", unknownTool(t.Name, d.tools))
			continue
		}
		if first := seen[t.Name]; first != nil {
			d.report(d.at(namePath), namePath, "tool %q is already configured at line %d", t.Name, first.Line)
		} else {
			seen[t.Name] = d.at(namePath)
		}

		rootsPath := path + ".roots"
		switch {
		case !d.ok(rootsPath):
		case !spec.roots && len(t.Roots) > 0:
			d.report(d.at(rootsPath), rootsPath, "tool %q does not take roots", t.Name)
		case spec.roots && len(t.Roots) == 0:
			msg := "required key is missing"
			if d.nodes[rootsPath] != nil {
				msg = "must list at least one directory"
			}
			d.report(d.at(rootsPath), rootsPath, "%s (%s reads files only below its roots)", msg, t.Name)
		case spec.roots:
			for k, r := range t.Roots {
				d.checkRoot(r, fmt.Sprintf("%s[%d]", rootsPath, k))
			}
		}

		bytesPath := path + ".max_bytes"
		switch {
		case !d.ok(bytesPath):
		case !spec.maxBytes && t.MaxBytes != 0:
			d.report(d.at(bytesPath), bytesPath, "tool %q does not take max_bytes", t.Name)
		case t.MaxBytes < 0:
			d.report(d.at(bytesPath), bytesPath, "must not be negative, got %d", t.MaxBytes)
		}
	}
}

// checkRoot checks that the resolved root directory r exists.
func (d *decoder) checkRoot(r, path string) {
	if !d.ok(path) {
		return
	}
	if r == "" {
		d.report(d.at(path), path, "must not be empty")
		return
	}
	fi, err := os.Stat(r)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.report(d.at(path), path, "directory %s does not exist", r)
	case err != nil:
		d.report(d.at(path), path, "cannot use root: %v", err)
	case !fi.IsDir():
		d.report(d.at(path), path, "%s is not a directory", r)
	}
}

func unknownTool(name string, tools map[string]toolSpec) string {
	known := slices.Sorted(maps.Keys(tools))
	msg := fmt.Sprintf("unknown tool %s", quote(name))
	if s := suggest(name, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; known tools: " + strings.Join(known, ", ")
}

// ok reports whether path and every path above it decoded without a
// problem.
func (d *decoder) ok(path string) bool {
	for {
		if d.bad[path] {
			return false
		}
		if path == "" {
			return true
		}
		path = parent(path)
	}
}

// at returns the node of path, or of the nearest path above it that has
// one: the position a problem about path is reported at.
func (d *decoder) at(path string) *yaml.Node {
	for {
		if n := d.nodes[path]; n != nil {
			return n
		}
		if path == "" {
			return &yaml.Node{Line: 1, Column: 1}
		}
		path = parent(path)
	}
}

// parent returns the path above path: "tools[0]" for "tools[0].roots", and
// "tools" for "tools[0]".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// checkTemplate checks the braces of a task template: placeholders are
// {name}, and {{ and }} stand for literal braces. The job package parses the
// template fully when the job is compiled; this catches the common mistakes
// early, with a position in the file.
func checkTemplate(s string) error {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				i++
				continue
			}
			end := strings.IndexAny(s[i+1:], "{}")
			if end < 0 || s[i+1+end] == '{' {
				return fmt.Errorf(`"{" at offset %d is not closed (write "{{" for a literal brace)`, i)
			}
			if strings.TrimSpace(s[i+1:i+1+end]) == "" {
				return fmt.Errorf(`empty placeholder "{}" at offset %d`, i)
			}
			i += 1 + end
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				i++
				continue
			}
			return fmt.Errorf(`"}" at offset %d has no matching "{" (write "}}" for a literal brace)`, i)
		}
	}
	return nil
}
