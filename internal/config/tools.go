package config

import (
	"database/sql"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
	"github.com/batchagent/batchagent/tool/httptool"
	"github.com/batchagent/batchagent/tool/mcptool"
	"github.com/batchagent/batchagent/tool/sqltool"
)

// A toolKind is one built-in tool of the job file: how its settings decode
// and how the tool is built from them. Adding a tool is adding an entry to
// toolKinds.
type toolKind struct {
	// new returns the tool's settings with their defaults filled in: a
	// pointer to the config type its package takes.
	new func() any
	// keys returns the tool's own keys, bound to settings; every tool
	// also takes name and the policy keys.
	keys func(settings any) keys
	// check resolves the paths of settings and reports what is missing
	// or wrong at path, the tool's path in the file.
	check func(d *decoder, path string, settings any)
	// build builds the tool. It returns, besides the tool, a resource to
	// close after the tool (a database), or nil.
	build func(settings any, p tool.Policy) (tool.Tool, io.Closer, error)
}

// kind returns the toolKind of settings of type S.
func kind[S any](
	newS func() *S,
	keysOf func(*S) keys,
	check func(*decoder, string, *S),
	build func(*S, tool.Policy) (tool.Tool, io.Closer, error),
) toolKind {
	return toolKind{
		new:  func() any { return newS() },
		keys: func(s any) keys { return keysOf(s.(*S)) },
		check: func(d *decoder, path string, s any) {
			if check != nil {
				check(d, path, s.(*S))
			}
		},
		build: func(s any, p tool.Policy) (tool.Tool, io.Closer, error) { return build(s.(*S), p) },
	}
}

// SQLQuery is the settings of sql_query: the database file, and the rest of
// sqltool.QueryConfig (its DB is opened from Database when the tool is
// built).
type SQLQuery struct {
	// Database is the absolute path of the SQLite file, opened read only.
	Database string
	sqltool.QueryConfig
}

// SQLLookup is the settings of sql_lookup, like [SQLQuery].
type SQLLookup struct {
	// Database is the absolute path of the SQLite file, opened read only.
	Database string
	sqltool.LookupConfig
}

// toolKinds are the tools a job file may name. Results of every tool are
// cacheable unless the file says otherwise: a batch reads the same files
// and pages over and over.
var toolKinds = map[string]toolKind{
	"read_file": kind(
		func() *filetool.ReadFileConfig { return &filetool.ReadFileConfig{Cacheable: true} },
		func(c *filetool.ReadFileConfig) keys {
			return keys{{"roots", &c.Roots}, {"max_bytes", &c.MaxBytes}, {"max_media_bytes", sizeField{&c.MaxMediaBytes}}, {"cacheable", defaultBool{&c.Cacheable, true}}}
		},
		func(d *decoder, path string, c *filetool.ReadFileConfig) { d.checkRoots(path, c.Roots, "read_file") },
		func(c *filetool.ReadFileConfig, _ tool.Policy) (tool.Tool, io.Closer, error) {
			t, err := filetool.ReadFile(*c)
			return t, nil, err
		}),
	"list_dir": kind(
		func() *filetool.ListDirConfig { return &filetool.ListDirConfig{Cacheable: true} },
		func(c *filetool.ListDirConfig) keys {
			return keys{{"roots", &c.Roots}, {"max_entries", &c.MaxEntries}, {"cacheable", defaultBool{&c.Cacheable, true}}}
		},
		func(d *decoder, path string, c *filetool.ListDirConfig) { d.checkRoots(path, c.Roots, "list_dir") },
		func(c *filetool.ListDirConfig, _ tool.Policy) (tool.Tool, io.Closer, error) {
			t, err := filetool.ListDir(*c)
			return t, nil, err
		}),
	"http_get": kind(
		func() *httptool.Config { return &httptool.Config{Cacheable: true} },
		func(c *httptool.Config) keys {
			return keys{{"allow_hosts", &c.AllowHosts}, {"allow_private", &c.AllowPrivate}, {"max_bytes", &c.MaxBytes},
				{"max_redirects", offInt{v: &c.MaxRedirects, offValue: -1, minusOne: true}}, {"cacheable", defaultBool{&c.Cacheable, true}}}
		},
		nil,
		func(c *httptool.Config, p tool.Policy) (tool.Tool, io.Closer, error) {
			cfg := *c
			cfg.Timeout = p.Timeout
			t, err := httptool.Get(cfg)
			return t, nil, err
		}),
	"sql_query": kind(
		func() *SQLQuery { return &SQLQuery{QueryConfig: sqltool.QueryConfig{Cacheable: true}} },
		func(c *SQLQuery) keys {
			return keys{{"database", &c.Database}, {"max_rows", &c.MaxRows}, {"cacheable", defaultBool{&c.Cacheable, true}}}
		},
		func(d *decoder, path string, c *SQLQuery) { d.checkDatabase(path, &c.Database, "sql_query") },
		func(c *SQLQuery, p tool.Policy) (tool.Tool, io.Closer, error) {
			cfg := c.QueryConfig
			cfg.Timeout = p.Timeout
			return buildSQL(c.Database, &cfg.DB, func() (tool.Tool, error) { return sqltool.Query(cfg) })
		}),
	"sql_lookup": kind(
		func() *SQLLookup { return &SQLLookup{LookupConfig: sqltool.LookupConfig{Cacheable: true}} },
		func(c *SQLLookup) keys {
			return keys{{"database", &c.Database}, {"table", &c.Table}, {"key", &c.Key}, {"columns", &c.Columns},
				{"max_rows", &c.MaxRows}, {"cacheable", defaultBool{&c.Cacheable, true}}}
		},
		func(d *decoder, path string, c *SQLLookup) {
			d.checkDatabase(path, &c.Database, "sql_lookup")
			for _, k := range []string{"table", "key"} {
				kp := path + "." + k
				if d.ok(kp) && d.nodes[kp] == nil {
					d.report(d.at(path), kp, "required key is missing (sql_lookup looks rows up by a key column of a table)")
				}
			}
		},
		func(c *SQLLookup, p tool.Policy) (tool.Tool, io.Closer, error) {
			cfg := c.LookupConfig
			cfg.Timeout = p.Timeout
			return buildSQL(c.Database, &cfg.DB, func() (tool.Tool, error) { return sqltool.Lookup(cfg) })
		}),
}

// buildSQL opens the database of a SQL tool read only into *db, the DB of
// the config that build builds the tool from; the database is closed if
// the build fails.
func buildSQL(database string, db **sql.DB, build func() (tool.Tool, error)) (tool.Tool, io.Closer, error) {
	var err error
	if *db, err = sqltool.OpenSQLite(database, true); err != nil {
		return nil, nil, err
	}
	t, err := build()
	if err != nil {
		_ = (*db).Close() // the build error is the one to report
		return nil, nil, err
	}
	return t, *db, nil
}

// policyKeys are the keys every tool and MCP server takes: its policy.
func policyKeys(p *tool.Policy) keys {
	return keys{
		{"rate", &p.Rate}, {"burst", &p.Burst}, {"max_concurrent", &p.MaxConcurrent}, {"timeout", &p.Timeout},
		{"no_coalesce", &p.NoCoalesce}, {"batch_window", &p.BatchWindow}, {"batch_max", &p.BatchMax},
	}
}

// allToolKeys are the keys of every tool, for messages.
var allToolKeys = func() []string {
	names := []string{"name"}
	names = append(names, policyKeys(new(tool.Policy)).names()...)
	for _, name := range slices.Sorted(maps.Keys(toolKinds)) {
		k := toolKinds[name]
		for _, n := range k.keys(k.new()).names() {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}()

// Tool is one built-in tool of the job file, its settings decoded straight
// into the config type of its package.
type Tool struct {
	// Name is the name of a built-in tool: read_file, list_dir, http_get,
	// sql_query or sql_lookup.
	Name string
	// Settings are the tool's settings, defaults filled in:
	// *filetool.ReadFileConfig, *filetool.ListDirConfig, *httptool.Config,
	// *SQLQuery or *SQLLookup. Paths are absolute.
	Settings any
	// Policy limits the tool's executions; its Timeout is also the tool's
	// own timeout.
	Policy tool.Policy
}

// Build builds the tool. It returns, besides the tool, a resource to close
// after the tool (the database of a SQL tool), or nil; a tool that is an
// io.Closer must be closed too.
func (t *Tool) Build() (tool.Tool, io.Closer, error) {
	k, ok := toolKinds[t.Name]
	if !ok || t.Settings == nil {
		return nil, nil, fmt.Errorf("unknown tool %q", t.Name)
	}
	return k.build(t.Settings, t.Policy)
}

// decode decodes a tool's mapping: its name first, which says which keys
// it takes.
func (t *Tool) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	entries := d.entries(n, path)
	namePath := path + ".name"
	named := false
	for _, e := range entries {
		if e.key.Value == "name" {
			named = true
			d.into(e.value, namePath, &t.Name)
		}
	}
	k, known := toolKinds[t.Name]
	switch {
	case !d.ok(namePath):
	case !named || d.nodes[namePath] == nil || isNull(d.nodes[namePath]):
		d.report(d.at(namePath), namePath, "required key is missing")
	case t.Name == "":
		d.report(d.at(namePath), namePath, "must not be empty")
	case !known:
		d.report(d.at(namePath), namePath, "%s", unknownTool(t.Name))
	}
	var own keys
	if known {
		t.Settings = k.new()
		own = k.keys(t.Settings)
	}
	common := policyKeys(&t.Policy)
	for _, e := range entries {
		name, kp := e.key.Value, join(path, e.key.Value)
		if ck, ok := common.find(name); ok {
			d.into(e.value, kp, ck.dst)
			continue
		}
		if ok_, found := own.find(name); found {
			d.into(e.value, kp, ok_.dst)
			continue
		}
		switch {
		case name == "name":
		case !slices.Contains(allToolKeys, name):
			d.unknownKey(e.key, path, allToolKeys)
		case known:
			d.nodes[kp] = e.value
			d.report(e.value, kp, "tool %q does not take %s", t.Name, name)
		}
	}
}

func (t *Tool) encode() (any, error) {
	ks := keys{{"name", &t.Name}}
	if k, ok := toolKinds[t.Name]; ok && t.Settings != nil {
		ks = append(ks, k.keys(t.Settings)...)
	}
	ks = append(ks, policyKeys(&t.Policy)...)
	return nilNode(encodeTable(ks))
}

// MCPServer is an MCP server whose tools the agents may call: a stdio
// command or a streamable-HTTP URL.
type MCPServer struct {
	// Server is what mcptool.Connect takes. Its Timeout is Policy's.
	Server mcptool.ServerConfig
	// Policy limits each of the server's tools.
	Policy tool.Policy
}

func (m *MCPServer) keys() keys {
	s := &m.Server
	return append(keys{
		{"name", &s.Name}, {"command", &s.Command}, {"env", &s.Env}, {"url", &s.URL}, {"tools", &s.Tools},
		{"cacheable", &s.Cacheable}, {"connect_timeout", &s.ConnectTimeout},
	}, policyKeys(&m.Policy)...)
}

func unknownTool(name string) string {
	known := slices.Sorted(maps.Keys(toolKinds))
	msg := fmt.Sprintf("unknown tool %s", quote(name))
	if s := suggest(name, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; known tools: " + strings.Join(known, ", ")
}
