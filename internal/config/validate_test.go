package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/config"
)

func TestParseSemanticProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "file.txt", "not a directory")
	writeFile(t, dir, "bad.json", "{\n  \"type\": \"object\",\n}\n")
	writeFile(t, dir, "bad.yaml", "type: object\ntype: string\n")
	writeFile(t, dir, "list.json", "[1, 2]")
	writeFile(t, dir, "min_length.json", `{"type": "string", "minLength": 1.5}`)
	writeFile(t, dir, "syntax.yaml", "type: object\nproperties: {a: b: c}\n")
	mkdir(t, dir, "docs")

	runProblemCases(t, dir, []problemCase{
		{
			name: "missing task",
			in:   "name: x\nmodel: m\n",
			want: []config.Problem{{Line: 1, Col: 1, Path: "task", Msg: "required key is missing"}},
		},
		{
			name: "empty task",
			in:   "task: \"  \"\n",
			want: []config.Problem{{Line: 1, Col: 7, Path: "task", Msg: "must not be empty"}},
		},
		{
			name: "null task",
			in:   "task:\nname: x\n",
			want: []config.Problem{{Line: 1, Col: 6, Path: "task", Msg: "must not be empty"}},
		},
		{
			name: "unclosed placeholder",
			in:   "task: 'Summarise {doc'\n",
			want: []config.Problem{{Line: 1, Col: 7, Path: "task", Msg: `invalid template (line 1, col 11 of the template): unclosed "{" (write "{{" for a literal brace)`}},
		},
		{
			name: "stray closing brace",
			in:   "task: 'a {b}} c'\n",
			want: []config.Problem{{Line: 1, Col: 7, Path: "task", Msg: `invalid template (line 1, col 6 of the template): unexpected "}" (write "}}" for a literal brace)`}},
		},
		{
			name: "empty placeholder",
			in:   "task: 'a { } c'\n",
			want: []config.Problem{{Line: 1, Col: 7, Path: "task", Msg: `invalid template (line 1, col 4 of the template): unexpected ' ' in placeholder (write "{{" for a literal brace)`}},
		},
		{
			name: "placeholder starting with a digit",
			in:   "task: 'Summarise {1x}'\n",
			want: []config.Problem{{Line: 1, Col: 7, Path: "task", Msg: `invalid template (line 1, col 12 of the template): invalid placeholder {1x}: a field name must start with a letter or underscore`}},
		},
		{
			name: "placeholder with an empty segment",
			in:   "task: |\n  Summarise\n  {doc..title}\n",
			want: []config.Problem{{Line: 1, Col: 7, Path: "task", Msg: `invalid template (line 2, col 6 of the template): invalid placeholder {doc..title}: empty name segment`}},
		},
		{
			name: "bad reduce task",
			in:   "task: x\nreduce:\n  task: 'Combine {outputs'\n",
			want: []config.Problem{{Line: 3, Col: 9, Path: "reduce.task", Msg: `invalid template (line 1, col 9 of the template): unclosed "{" (write "{{" for a literal brace)`}},
		},
		{
			name: "reduce task with a space in a placeholder",
			in:   "task: x\nreduce: {task: '{a b}'}\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "reduce.task", Msg: `invalid template (line 1, col 3 of the template): unexpected ' ' in placeholder (write "{{" for a literal brace)`}},
		},
		{
			name: "negative limits",
			in:   "task: x\nlimits:\n  max_turns: -1\n  max_active: -2\n  max_retries: -3\n  timeout: -5s\n",
			want: []config.Problem{
				{Line: 3, Col: 14, Path: "limits.max_turns", Msg: "must not be negative, got -1"},
				{Line: 4, Col: 15, Path: "limits.max_active", Msg: "must not be negative, got -2"},
				{Line: 5, Col: 16, Path: "limits.max_retries", Msg: "must be off or not negative, got -3"},
				{Line: 6, Col: 12, Path: "limits.timeout", Msg: "must not be negative, got -5s"},
			},
		},
		{
			name: "backend without scheme",
			in:   "task: x\nbackend: localhost\n",
			want: []config.Problem{{Line: 2, Col: 10, Path: "backend", Msg: `backend URL "localhost" has no scheme (for example "sim://" or "openai://")`}},
		},
		{
			name: "backend without scheme, with a key",
			in:   "task: x\nbackend: '//user:sk-1@gpu:8000/v1?key=sk-2'\n",
			want: []config.Problem{{Line: 2, Col: 10, Path: "backend", Msg: `backend URL "//gpu:8000/v1" has no scheme (for example "sim://" or "openai://")`}},
		},
		{
			name: "backend with a misspelt scheme",
			in:   "task: x\nbackend: 'opneai://?key=sk-2'\n",
			want: []config.Problem{{Line: 2, Col: 10, Path: "backend", Msg: `unsupported scheme "opneai" (did you mean "openai"?) (supported: sim, sim+http, http, https, openai, openai+http, openai+https, vllm, sglang, llamacpp, ollama, anthropic, anthropic+http, anthropic+https, bedrock)`}},
		},
		{
			name: "backend host:port without scheme",
			in:   "task: x\nbackend: localhost:8000/v1\n",
			want: []config.Problem{{Line: 2, Col: 10, Path: "backend", Msg: `URL has no scheme (did you mean "http://localhost:8000/v1"?; supported: sim, sim+http, http, https, openai, openai+http, openai+https, vllm, sglang, llamacpp, ollama, anthropic, anthropic+http, anthropic+https, bedrock)`}},
		},
		{
			name: "backend that does not parse",
			in:   "task: x\nbackend: '://x'\n",
			want: []config.Problem{{Line: 2, Col: 10, Path: "backend", Msg: "invalid backend URL: missing protocol scheme"}},
		},
		{
			name: "unknown tool close to a known one",
			in:   "task: x\ntools:\n  - name: read_fil\n",
			want: []config.Problem{{Line: 3, Col: 11, Path: "tools[0].name", Msg: `unknown tool "read_fil" (did you mean "read_file"?); known tools: http_get, list_dir, read_file, sql_lookup, sql_query`}},
		},
		{
			name: "tool without name",
			in:   "task: x\ntools:\n  - roots: [docs]\n  - name: ''\n",
			want: []config.Problem{
				{Line: 3, Col: 5, Path: "tools[0].name", Msg: "required key is missing"},
				{Line: 4, Col: 11, Path: "tools[1].name", Msg: "must not be empty"},
			},
		},
		{
			name: "tool configured twice",
			in:   "task: x\ntools:\n  - {name: read_file, roots: [docs]}\n  - {name: read_file, roots: [docs]}\n",
			want: []config.Problem{{Line: 4, Col: 12, Path: "tools[1].name", Msg: `tool "read_file" is already configured at line 3`}},
		},
		{
			name: "read_file without roots",
			in:   "task: x\ntools:\n  - name: read_file\n  - name: read_file\n    roots: []\n",
			want: []config.Problem{
				{Line: 3, Col: 5, Path: "tools[0].roots", Msg: "required key is missing (read_file reads files only below its roots)"},
				{Line: 4, Col: 11, Path: "tools[1].name", Msg: `tool "read_file" is already configured at line 3`},
				{Line: 5, Col: 12, Path: "tools[1].roots", Msg: "must list at least one directory (read_file reads files only below its roots)"},
			},
		},
		{
			name: "bad roots",
			in:   "task: x\ntools:\n  - name: read_file\n    max_bytes: -1\n    roots:\n      - docs\n      - missing\n      - file.txt\n      - ''\n",
			want: []config.Problem{
				{Line: 4, Col: 16, Path: "tools[0].max_bytes", Msg: "must not be negative, got -1"},
				{Line: 7, Col: 9, Path: "tools[0].roots[1]", Msg: "directory $DIR/missing does not exist"},
				{Line: 8, Col: 9, Path: "tools[0].roots[2]", Msg: "$DIR/file.txt is not a directory"},
				{Line: 9, Col: 9, Path: "tools[0].roots[3]", Msg: "must not be empty"},
			},
		},
		{
			name: "schema file missing",
			in:   "task: x\noutput_schema: nope.json\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "schema file $DIR/nope.json does not exist"}},
		},
		{
			name: "schema file with invalid JSON",
			in:   "task: x\noutput_schema: bad.json\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "schema file $DIR/bad.json:3:1: invalid JSON: invalid character '}' looking for beginning of object key string"}},
		},
		{
			name: "schema file that is not an object",
			in:   "task: x\noutput_schema: list.json\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "schema file $DIR/list.json must hold a JSON object"}},
		},
		{
			name: "schema file with a duplicate key",
			in:   "task: x\noutput_schema: bad.yaml\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: `schema file $DIR/bad.yaml:2:1: type: duplicate key "type" (first at line 1)`}},
		},
		{
			name: "schema file with invalid YAML",
			in:   "task: x\noutput_schema: syntax.yaml\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "schema file $DIR/syntax.yaml:2: invalid YAML: did not find expected ',' or '}'"}},
		},
		{
			name: "schema directory",
			in:   "task: x\noutput_schema: docs\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "cannot read schema file: read $DIR/docs: is a directory"}},
		},
		{
			name: "schema that does not compile",
			in:   "task: x\noutput_schema: {type: object, properties: {a: {pattern: '('}}}\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "invalid schema: $.properties.a.pattern: \"(\" is not a valid regex: error parsing regexp: missing closing ): `(`"}},
		},
		{
			name: "schema file that does not compile",
			in:   "task: x\noutput_schema: min_length.json\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: `schema file $DIR/min_length.json: invalid schema: $.minLength: got number, want integer`}},
		},
		{
			name: "reduce schema that does not compile",
			in:   "task: x\nreduce:\n  task: '{outputs}'\n  output_schema: {$ref: 'https://example.com/s.json'}\n",
			want: []config.Problem{{Line: 4, Col: 18, Path: "reduce.output_schema", Msg: `invalid schema: failing loading "https://example.com/s.json": only references within the schema document are supported`}},
		},
		{
			name: "option a tool does not take",
			in:   "task: x\ntools:\n  - name: http_get\n    roots: [docs]\n    max_entries: 10\n",
			want: []config.Problem{
				{Line: 4, Col: 12, Path: "tools[0].roots", Msg: `tool "http_get" does not take roots`},
				{Line: 5, Col: 18, Path: "tools[0].max_entries", Msg: `tool "http_get" does not take max_entries`},
			},
		},
		{
			name: "inline schema that is a list",
			in:   "task: x\noutput_schema: [a]\n",
			want: []config.Problem{{Line: 2, Col: 16, Path: "output_schema", Msg: "expected an inline schema (a mapping) or a schema file path, got a list"}},
		},
		{
			name: "inline schema JSON cannot hold",
			in:   "task: x\noutput_schema:\n  1: a\n  max: .inf\n  a: {b: 1, b: 2}\n",
			want: []config.Problem{
				{Line: 3, Col: 3, Path: "output_schema", Msg: "schema keys must be strings, got 1 (quote it)"},
				{Line: 4, Col: 8, Path: "output_schema.max", Msg: ".inf cannot be written as JSON"},
				{Line: 5, Col: 13, Path: "output_schema.a.b", Msg: `duplicate key "b" (first at line 5)`},
			},
		},
		{
			name: "semantic checks skip values that did not decode",
			in:   "task: {x: 1}\nbackend: [a]\nlimits: {max_turns: x}\ntools: [{name: [read_file]}]\n",
			want: []config.Problem{
				{Line: 1, Col: 7, Path: "task", Msg: "expected a string, or a list of text, image, audio and file items, got a mapping"},
				{Line: 2, Col: 10, Path: "backend", Msg: "expected a backend URL or a mapping of deployments, got a list"},
				{Line: 3, Col: 21, Path: "limits.max_turns", Msg: "cannot unmarshal !!str `x` into int"},
				{Line: 4, Col: 16, Path: "tools[0].name", Msg: "expected a string, got a list"},
			},
		},
	})
}

func TestParseIssue4Tools(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "shop.db", "")
	mkdir(t, dir, "docs")
	j, err := config.Parse([]byte(`task: x
tools:
  - name: list_dir
    roots: [docs]
    max_entries: 50
  - name: http_get
    allow_hosts: [api.example.com, "*.docs.example.com"]
    timeout: 5s
    rate: 2.5
    max_concurrent: 4
  - name: sql_lookup
    database: shop.db
    table: products
    key: sku
    columns: [sku, name]
    batch_window: 10ms
    batch_max: 50
mcp:
  - name: files
    command: [mcp-files, --root, .]
    tools: [search]
    cacheable: true
  - name: remote
    url: https://mcp.example.com/mcp
`), "job.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Tools[1].Policy; got.Rate != 2.5 || got.MaxConcurrent != 4 || time.Duration(got.Timeout) != 5*time.Second {
		t.Errorf("http_get policy = %+v", got)
	}
	if got, ok := j.Tools[2].Settings.(*config.SQLLookup); !ok || got.Database != filepath.Join(dir, "shop.db") || got.Table != "products" || j.Tools[2].Policy.BatchMax != 50 {
		t.Errorf("sql_lookup = %+v", j.Tools[2])
	}
	if len(j.MCP) != 2 || j.MCP[0].Server.Command[0] != "mcp-files" || !j.MCP[0].Server.Cacheable || j.MCP[1].Server.URL == "" {
		t.Errorf("mcp = %+v", j.MCP)
	}

	_, err = config.Parse([]byte(`task: x
tools:
  - name: http_get
    roots: [docs]
    rate: -1
  - name: sql_query
  - name: sql_lookup
    database: missing.db
mcp:
  - name: both
    command: [x]
    url: http://h/mcp
  - command: [y]
`), "job.yaml", dir)
	for _, want := range []string{
		`job.yaml:4:12: tools[0].roots: tool "http_get" does not take roots`,
		`tools[0].rate: must not be negative`,
		`tools[1].database: required key is missing`,
		`tools[2].database: cannot open database`,
		`tools[2].table: required key is missing`,
		`mcp[0].url: give command or url, not both`,
		`mcp[1].name: required key is missing`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(bad tools) error lacks %q:\n%v", want, err)
		}
	}
}
