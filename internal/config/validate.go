package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/schema"
)

// toolSpec says which options a built-in tool takes. Every tool takes
// name, cacheable and the policy options.
type toolSpec struct {
	roots    bool     // requires at least one root
	database bool     // requires a database file
	options  []string // the other options it takes
}

// builtinTools are the tools a job file may name.
var builtinTools = map[string]toolSpec{
	"read_file":  {roots: true, options: []string{"roots", "max_bytes"}},
	"list_dir":   {roots: true, options: []string{"roots", "max_entries"}},
	"http_get":   {options: []string{"allow_hosts", "allow_private", "max_bytes", "max_redirects"}},
	"sql_query":  {database: true, options: []string{"database", "max_rows"}},
	"sql_lookup": {database: true, options: []string{"database", "table", "key", "columns", "max_rows"}},
}

// commonToolKeys are taken by every tool.
var commonToolKeys = []string{"name", "cacheable", "rate", "burst", "max_concurrent", "timeout", "no_coalesce", "batch_window", "batch_max"}

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
			d.checkTemplate(n, "task", j.Task)
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

	d.checkSchema("output_schema", j.OutputSchema)
	d.validateLimits(&j.Limits)
	d.validateKnobs(j)
	d.validateTools(j.Tools)
	d.validateMCP(j.MCP)
	d.validateReduce(j.Reduce)
}

// validateReduce checks the reduce step.
func (d *decoder) validateReduce(r *Reduce) {
	if r == nil || !d.ok("reduce") {
		return
	}
	switch {
	case !d.ok("reduce.task"):
	case r.Task == "":
		d.report(d.at("reduce"), "reduce.task", "required key is missing (the prompt that combines outputs; {outputs} is their JSON array)")
	default:
		d.checkTemplate(d.at("reduce.task"), "reduce.task", r.Task)
	}
	d.checkSchema("reduce.output_schema", r.OutputSchema)
	if r.GroupSize == 1 || r.GroupSize < 0 {
		if d.ok("reduce.group_size") {
			d.report(d.at("reduce.group_size"), "reduce.group_size", "must be at least 2, got %d", r.GroupSize)
		}
	}
	if r.MaxBytes < 0 && d.ok("reduce.max_bytes") {
		d.report(d.at("reduce.max_bytes"), "reduce.max_bytes", "must not be negative, got %d", r.MaxBytes)
	}
	if r.Output != "" {
		r.Output = d.resolve(r.Output)
	}
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
	if l.OutageBudget < 0 && d.ok("limits.outage_budget") {
		d.report(d.at("limits.outage_budget"), "limits.outage_budget", "must not be negative, got %s", l.OutageBudget)
	}
}

func (d *decoder) validateTools(tools []Tool) {
	if len(tools) == 0 {
		return
	}
	seen := make(map[string]*yaml.Node)
	toolFields := fieldsOf(reflect.TypeFor[Tool]())
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
		spec, known := builtinTools[t.Name]
		if !known {
			d.report(d.at(namePath), namePath, "%s", unknownTool(t.Name))
			continue
		}
		if first := seen[t.Name]; first != nil {
			d.report(d.at(namePath), namePath, "tool %q is already configured at line %d", t.Name, first.Line)
		} else {
			seen[t.Name] = d.at(namePath)
		}

		tv := reflect.ValueOf(*t)
		for _, key := range toolFields.names {
			kp := path + "." + key
			set := d.nodes[kp] != nil && !tv.FieldByIndex(toolFields.index[key]).IsZero()
			if set && d.ok(kp) && !slices.Contains(commonToolKeys, key) && !slices.Contains(spec.options, key) {
				d.report(d.at(kp), kp, "tool %q does not take %s", t.Name, key)
			}
		}

		rootsPath := path + ".roots"
		switch {
		case !d.ok(rootsPath) || !spec.roots:
		case len(t.Roots) == 0:
			msg := "required key is missing"
			if d.nodes[rootsPath] != nil {
				msg = "must list at least one directory"
			}
			d.report(d.at(rootsPath), rootsPath, "%s (%s reads files only below its roots)", msg, t.Name)
		default:
			for k, r := range t.Roots {
				d.checkRoot(r, fmt.Sprintf("%s[%d]", rootsPath, k))
			}
		}
		if spec.database {
			d.checkDatabase(t, path)
		}
		if t.Name == "sql_lookup" {
			for _, key := range []string{"table", "key"} {
				kp := path + "." + key
				if d.ok(kp) && d.nodes[kp] == nil {
					d.report(d.at(path), kp, "required key is missing (sql_lookup looks rows up by a key column of a table)")
				}
			}
		}
		for key, v := range map[string]int64{"max_bytes": t.MaxBytes, "max_entries": int64(t.MaxEntries), "max_rows": int64(t.MaxRows),
			"burst": int64(t.Burst), "max_concurrent": int64(t.MaxConcurrent), "batch_max": int64(t.BatchMax)} {
			kp := path + "." + key
			if v < 0 && d.ok(kp) {
				d.report(d.at(kp), kp, "must not be negative, got %d", v)
			}
		}
		for key, v := range map[string]Duration{"timeout": t.Timeout, "batch_window": t.BatchWindow} {
			if kp := path + "." + key; v < 0 && d.ok(kp) {
				d.report(d.at(kp), kp, "must not be negative, got %s", v)
			}
		}
		if kp := path + ".rate"; t.Rate < 0 && d.ok(kp) {
			d.report(d.at(kp), kp, "must not be negative")
		}
	}
}

// checkDatabase resolves and checks the database file of a SQL tool.
func (d *decoder) checkDatabase(t *Tool, path string) {
	kp := path + ".database"
	if !d.ok(kp) {
		return
	}
	if t.Database == "" {
		d.report(d.at(path), kp, "required key is missing (the SQLite file %s queries)", t.Name)
		return
	}
	t.Database = d.resolve(t.Database)
	fi, err := os.Stat(t.Database)
	switch {
	case err != nil:
		d.report(d.at(kp), kp, "cannot open database: %v", err)
	case fi.IsDir():
		d.report(d.at(kp), kp, "%s is a directory, want a SQLite file", t.Database)
	}
}

// validateMCP checks the MCP servers.
func (d *decoder) validateMCP(servers []MCPServer) {
	names := map[string]bool{}
	for i, m := range servers {
		path := fmt.Sprintf("mcp[%d]", i)
		if !d.ok(path) {
			continue
		}
		switch {
		case m.Name == "":
			d.report(d.at(path), path+".name", "required key is missing")
		case names[m.Name]:
			d.report(d.at(path+".name"), path+".name", "MCP server %q is listed twice", m.Name)
		}
		names[m.Name] = true
		switch {
		case len(m.Command) == 0 && m.URL == "":
			d.report(d.at(path), path, "give command (a stdio server) or url (a streamable-HTTP server)")
		case len(m.Command) > 0 && m.URL != "":
			d.report(d.at(path+".url"), path+".url", "give command or url, not both")
		case m.URL != "":
			if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.report(d.at(path+".url"), path+".url", "want an http or https URL, got %s", quote(m.URL))
			}
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

func unknownTool(name string) string {
	known := slices.Sorted(maps.Keys(builtinTools))
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

// checkSchema reports at path an output schema that does not compile, so
// that it is found before any agent runs.
func (d *decoder) checkSchema(path string, s Schema) {
	if s.JSON == nil || !d.ok(path) {
		return
	}
	if _, err := schema.Compile(s.JSON); err != nil {
		msg := strings.TrimPrefix(err.Error(), "schema: ")
		if s.File != "" {
			msg = "schema file " + s.File + ": " + msg
		}
		d.report(d.at(path), path, "%s", msg)
	}
}

// checkTemplate reports at node n, the value of path, a template that the
// job package refuses, so that a bad template is found before any agent runs.
func (d *decoder) checkTemplate(n *yaml.Node, path, text string) {
	_, err := job.ParseTemplate(text)
	if err == nil {
		return
	}
	if se, ok := errors.AsType[*job.TemplateSyntaxError](err); ok {
		d.report(n, path, "invalid template (line %d, col %d of the template): %s", se.Line, se.Col, se.Msg)
		return
	}
	d.report(n, path, "invalid template: %v", err)
}
