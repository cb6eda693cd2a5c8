package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/schema"
)

// validate checks the meaning of a decoded job, resolves its paths and fills
// in defaults. It skips values that failed to decode, so that each mistake
// is reported once. root is the root mapping of the file.
func (d *decoder) validate(j *Job, root *yaml.Node) {
	if d.ok("task") {
		switch n := d.nodes["task"]; {
		case n == nil:
			d.report(root, "task", "required key is missing")
		case strings.TrimSpace(j.Def.Task) == "" && len(j.Def.Media) == 0:
			d.report(n, "task", "must not be empty")
		case j.Def.Task == "":
		default:
			d.checkTemplate(n, "task", j.Def.Task)
		}
	}

	switch {
	case len(j.Deployments) > 0: // checked as they decoded
	case j.Backend == "":
		j.Backend = DefaultBackend
	case d.ok("backend"):
		d.checkBackendURL("backend", j.Backend)
	}

	if j.Inputs != "" {
		j.Inputs = d.resolve(j.Inputs)
	}
	if j.Output != "" {
		j.Output = d.resolve(j.Output)
	}

	d.checkSchema("output_schema", j.Def.OutputSchema, j.SchemaFile)
	d.validateLimits(j)
	d.validateKnobs(j)
	d.validateTools(j.Tools)
	d.validateMCP(j.MCP)
	d.validateFallbacks(j)
	d.validateDeployments(j)
	d.validatePack(j)
	d.validateReduce(j.Reduce)
	d.validateMedia(j)

	// What the file's settings mean for the engine beyond their own
	// fields: the back-off also spaces the pauses of admission after
	// connection failures, and the outage budget bounds how long a run
	// waits for a backend that never answered.
	a := &j.Engine.Admission
	a.PauseBackoff = j.Def.Backoff
	switch {
	case j.Def.NoOutageBudget:
		a.NoStartWindow = true
	case j.Def.OutageBudget > 0:
		a.StartWindow = min(batchagent.DefaultStartWindow, j.Def.OutageBudget)
	}
}

// validateReduce checks the reduce step.
func (d *decoder) validateReduce(rd *Reduce) {
	if rd == nil || !d.ok("reduce") {
		return
	}
	r := &rd.Config
	switch {
	case !d.ok("reduce.task"):
	case r.Task == "":
		d.report(d.at("reduce"), "reduce.task", "required key is missing (the prompt that combines outputs; {outputs} is their JSON array)")
	default:
		d.checkTemplate(d.at("reduce.task"), "reduce.task", r.Task)
	}
	d.checkSchema("reduce.output_schema", r.OutputSchema, rd.SchemaFile)
	if r.GroupSize == 1 || r.GroupSize < 0 {
		if d.ok("reduce.group_size") {
			d.report(d.at("reduce.group_size"), "reduce.group_size", "must be at least 2, got %d", r.GroupSize)
		}
	}
	if r.MaxBytes < 0 && d.ok("reduce.max_bytes") {
		d.report(d.at("reduce.max_bytes"), "reduce.max_bytes", "must not be negative, got %d", r.MaxBytes)
	}
	if rd.Output != "" {
		rd.Output = d.resolve(rd.Output)
	}
}

func (d *decoder) validateLimits(j *Job) {
	for _, f := range []struct {
		path string
		v    int64
	}{
		{"limits.max_turns", int64(j.Def.MaxTurns)},
		{"limits.max_inflight", int64(j.Engine.Admission.MaxInflight)},
		{"limits.max_active", int64(j.Engine.MaxActive)},
		{"limits.rpm", int64(j.Engine.Admission.RateLimit.RPM)},
		{"limits.tpm", int64(j.Engine.Admission.RateLimit.TPM)},
		{"limits.otpm", int64(j.Engine.Admission.RateLimit.OTPM)},
	} {
		if f.v < 0 && d.ok(f.path) {
			d.report(d.at(f.path), f.path, "must not be negative, got %d", f.v)
		}
	}
	if j.Def.Timeout < 0 && d.ok("limits.timeout") {
		d.report(d.at("limits.timeout"), "limits.timeout", "must not be negative, got %s", j.Def.Timeout)
	}
	if c := j.Engine.Admission.Continuation; c < 0 && d.ok("limits.continuation") {
		d.report(d.at("limits.continuation"), "limits.continuation", "must not be negative, got %s", c)
	}
	switch p := j.Engine.Admission.Policy; p {
	case "", batchagent.PolicyFIFO, batchagent.PolicyTurns, batchagent.PolicyLAS:
	default:
		if d.ok("limits.policy") {
			d.report(d.at("limits.policy"), "limits.policy", "unknown policy %q (known: fifo, turns, las)", p)
		}
	}
	if v := j.MaxCost; d.nodes["limits.max_cost"] != nil && d.ok("limits.max_cost") && (!(v > 0) || math.IsInf(v, 0)) {
		d.report(d.at("limits.max_cost"), "limits.max_cost", "must be a number of dollars > 0, got %v", v)
	}
	if j.Def.OutageBudget < 0 && d.ok("limits.outage_budget") {
		d.report(d.at("limits.outage_budget"), "limits.outage_budget", "must not be negative, got %s", j.Def.OutageBudget)
	}
}

// validateTools checks each tool with its kind's check, the numbers and
// durations of its settings and policy (none may be negative), and that
// no tool is configured twice.
func (d *decoder) validateTools(tools []Tool) {
	seen := make(map[string]*yaml.Node)
	for i := range tools {
		t := &tools[i]
		path := fmt.Sprintf("tools[%d]", i)
		namePath := path + ".name"
		k, known := toolKinds[t.Name]
		if !d.ok(path) || !d.ok(namePath) || !known {
			continue
		}
		if first := seen[t.Name]; first != nil {
			d.report(d.at(namePath), namePath, "tool %q is already configured at line %d", t.Name, first.Line)
		} else {
			seen[t.Name] = d.at(namePath)
		}
		k.check(d, path, t.Settings)
		for _, key := range append(k.keys(t.Settings), policyKeys(&t.Policy)...) {
			d.checkNotNegative(path+"."+key.name, key.dst)
		}
	}
}

// checkNotNegative reports at path a negative number or duration in dst.
func (d *decoder) checkNotNegative(path string, dst any) {
	if !d.ok(path) {
		return
	}
	switch v := dst.(type) {
	case *int:
		if *v < 0 {
			d.report(d.at(path), path, "must not be negative, got %d", *v)
		}
	case *int64:
		if *v < 0 {
			d.report(d.at(path), path, "must not be negative, got %d", *v)
		}
	case *float64:
		if *v < 0 {
			d.report(d.at(path), path, "must not be negative")
		}
	case *time.Duration:
		if *v < 0 {
			d.report(d.at(path), path, "must not be negative, got %s", *v)
		}
	}
}

// checkRoots resolves the roots of a file tool and checks that each is a
// directory.
func (d *decoder) checkRoots(path string, roots []string, name string) {
	rootsPath := path + ".roots"
	for k, r := range roots {
		if r != "" {
			roots[k] = d.resolve(r)
		}
	}
	switch {
	case !d.ok(rootsPath):
	case len(roots) == 0:
		msg := "required key is missing"
		if d.nodes[rootsPath] != nil {
			msg = "must list at least one directory"
		}
		d.report(d.at(rootsPath), rootsPath, "%s (%s reads files only below its roots)", msg, name)
	default:
		for k, r := range roots {
			d.checkRoot(r, fmt.Sprintf("%s[%d]", rootsPath, k))
		}
	}
}

// checkDatabase resolves and checks the database file of a SQL tool.
func (d *decoder) checkDatabase(path string, db *string, name string) {
	kp := path + ".database"
	if !d.ok(kp) {
		return
	}
	if *db == "" {
		d.report(d.at(path), kp, "required key is missing (the SQLite file %s queries)", name)
		return
	}
	*db = d.resolve(*db)
	fi, err := os.Stat(*db)
	switch {
	case err != nil:
		d.report(d.at(kp), kp, "cannot open database: %v", err)
	case fi.IsDir():
		d.report(d.at(kp), kp, "%s is a directory, want a SQLite file", *db)
	}
}

// validateMCP checks the MCP servers.
func (d *decoder) validateMCP(servers []MCPServer) {
	names := map[string]bool{}
	for i := range servers {
		servers[i].Server.Timeout = servers[i].Policy.Timeout
		m := servers[i].Server
		path := fmt.Sprintf("mcp[%d]", i)
		if !d.ok(path) {
			continue
		}
		for _, key := range servers[i].keys() {
			d.checkNotNegative(path+"."+key.name, key.dst)
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

// checkSchema reports at path an output schema that does not compile, so
// that it is found before any agent runs.
func (d *decoder) checkSchema(path string, js json.RawMessage, file string) {
	if js == nil || !d.ok(path) {
		return
	}
	if _, err := schema.Compile(js); err != nil {
		msg := strings.TrimPrefix(err.Error(), "schema: ")
		if file != "" {
			msg = "schema file " + file + ": " + msg
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
