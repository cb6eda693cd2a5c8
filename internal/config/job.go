package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultBackend is the backend URL a job uses when its file names none: the
// in-process simulator.
const DefaultBackend = "sim://"

// Job is a parsed job file. Relative paths in the file have been resolved
// against the directory of the job file, so every path in a Job returned by
// [Load] or [Parse] is absolute.
//
// A Job is a plain value: the package never modifies one after returning it.
type Job struct {
	// Name is an optional label for the job.
	Name string `yaml:"name"`
	// Model is the model name passed to the backend. Empty means the
	// backend's default.
	Model string `yaml:"model"`
	// Backend is the backend URL, such as "sim://?latency=60ms&tool_turns=1".
	// Defaults to DefaultBackend.
	Backend string `yaml:"backend"`
	// APIKeyEnv names the environment variable holding the backend's API
	// key. Empty means the backend's usual one (OPENAI_API_KEY,
	// ANTHROPIC_API_KEY). Keys are never written in job files.
	APIKeyEnv string `yaml:"api_key_env"`
	// System is the system prompt. Empty means none.
	System string `yaml:"system"`
	// Task is the task template, with {field} placeholders and {{ and }} for
	// literal braces. It is required.
	Task string `yaml:"task"`
	// Inputs is the absolute path of a .jsonl or .csv input file. Empty means
	// the inputs come from elsewhere (a flag).
	Inputs string `yaml:"inputs"`
	// Output is the absolute path of the default output file. Empty means
	// none.
	Output string `yaml:"output"`
	// OutputSchema is the JSON Schema the output of each agent must satisfy,
	// written inline as YAML or given as the path of a .json or .yaml file.
	// Zero means no schema.
	OutputSchema Schema `yaml:"output_schema"`
	// Tools are the built-in tools the agents may call. Empty means none.
	Tools []Tool `yaml:"tools"`
	// MCP lists MCP servers whose tools the agents may call.
	MCP []MCPServer `yaml:"mcp"`
	// Limits are the engine limits. Zero fields mean the engine defaults.
	Limits Limits `yaml:"limits"`
	// MaxTokens caps the tokens of each generation. Zero means the engine's
	// default.
	MaxTokens int `yaml:"max_tokens"`
	// MaxTokensLimit caps the raised token cap with which an answer cut off
	// at max_tokens is asked again. Zero means the engine's default (4×
	// max_tokens); equal to max_tokens keeps the cap and only asks for a
	// shorter answer.
	MaxTokensLimit int `yaml:"max_tokens_limit"`
	// Temperature is the sampling temperature, from 0 (most likely tokens)
	// up; backends accept up to 1 (Anthropic) or 2 (OpenAI). Nil means the
	// backend's default.
	Temperature *float64 `yaml:"temperature"`
	// TopP is the nucleus sampling mass, in [0, 1]. Nil means the backend's
	// default.
	TopP *float64 `yaml:"top_p"`
	// Seed asks for deterministic sampling where the backend supports it
	// (OpenAI-compatible servers; Anthropic and Bedrock ignore it). Nil
	// means none.
	Seed *int64 `yaml:"seed"`
	// Stop lists sequences that end a generation. Empty means none.
	Stop []string `yaml:"stop"`
	// ToolPool configures the pool all tools run in: result cache, result
	// size cap and default timeout. Zero fields mean the defaults.
	ToolPool ToolPool `yaml:"tool_pool"`
	// WarmPrefix sends one request first and the rest only when it
	// returns, so the server's prefix cache holds the shared prefix.
	WarmPrefix bool `yaml:"warm_prefix"`
	// Reduce, when set, combines the outputs once the inputs are done.
	Reduce *Reduce `yaml:"reduce"`

	// Dir is the absolute directory of the job file; relative paths are
	// resolved against it.
	Dir string `yaml:"-"`
	// Path is the job file path as given to Load, or the name given to Parse.
	Path string `yaml:"-"`
}

// Schema holds an output schema as JSON. The zero Schema means no schema.
type Schema struct {
	// JSON is the schema as compact JSON, with object keys in the order of
	// the file. It is nil when no schema was given. A YAML mapping is
	// converted to JSON: keys must be strings, YAML integers stay integers
	// and other scalars map to their JSON counterparts.
	JSON json.RawMessage
	// File is the absolute path of the schema file when the schema was given
	// as a path, and empty when it was written inline.
	File string
}

// MarshalYAML implements yaml.Marshaler so that a marshalled Job reads back
// as the same Job: a schema from a file marshals as its path, an inline one
// as a mapping in flow style, and the zero Schema as null.
func (s Schema) MarshalYAML() (any, error) {
	switch {
	case s.File != "":
		return s.File, nil
	case s.JSON == nil:
		return nil, nil
	}
	// JSON is YAML, so yaml.v3 parses it into a node that keeps key order.
	var n yaml.Node
	if err := yaml.Unmarshal(s.JSON, &n); err != nil {
		return nil, fmt.Errorf("config: marshal schema: %w", err)
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return n.Content[0], nil
	}
	return &n, nil
}

// Tool configures one built-in tool. Each tool takes only the options that
// apply to it; see the table in the README.
type Tool struct {
	// Name is the name of a built-in tool: read_file, list_dir, http_get,
	// sql_query or sql_lookup. It is required.
	Name string `yaml:"name"`
	// Roots are the absolute directories read_file and list_dir may read
	// below. Required for them.
	Roots []string `yaml:"roots"`
	// MaxBytes caps what read_file reads and what http_get downloads. Zero
	// means the tool's default.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxEntries caps the entries list_dir returns. Zero means its default.
	MaxEntries int `yaml:"max_entries"`
	// AllowHosts are the hosts http_get may fetch ("example.com",
	// "*.example.com"); none by default.
	AllowHosts []string `yaml:"allow_hosts"`
	// AllowPrivate lets http_get reach loopback, private and link-local
	// addresses.
	AllowPrivate bool `yaml:"allow_private"`
	// Database is the SQLite file of sql_query and sql_lookup, opened read
	// only (absolute after parsing).
	Database string `yaml:"database"`
	// MaxRows caps the rows sql_query returns, and those sql_lookup
	// returns for one key. Zero means the tool's default.
	MaxRows int `yaml:"max_rows"`
	// MaxRedirects caps the redirects http_get follows; -1 follows none.
	// Zero means its default.
	MaxRedirects int `yaml:"max_redirects"`
	// Table, Key and Columns define sql_lookup: rows of Table whose Key
	// column equals the argument; Columns empty means all.
	Table   string   `yaml:"table"`
	Key     string   `yaml:"key"`
	Columns []string `yaml:"columns"`
	// Cacheable says whether results of the tool may be cached. Nil means
	// the tool's default.
	Cacheable *bool `yaml:"cacheable"`
	// Policy limits the tool's executions.
	Policy `yaml:",inline"`
}

// Policy limits a tool's executions: a rate, a concurrency cap, a timeout,
// and batching for batchable tools. Zero fields mean no limit or the
// default.
type Policy struct {
	Rate          float64  `yaml:"rate"`           // executions per second
	Burst         int      `yaml:"burst"`          // token bucket size
	MaxConcurrent int      `yaml:"max_concurrent"` // executions at once
	Timeout       Duration `yaml:"timeout"`        // per execution
	NoCoalesce    bool     `yaml:"no_coalesce"`    // run identical concurrent calls each
	BatchWindow   Duration `yaml:"batch_window"`   // batchable tools: wait for more calls
	BatchMax      int      `yaml:"batch_max"`      // batchable tools: calls per batch
}

// Reduce is a job's reduce step: a prompt over the map outputs, applied
// hierarchically when they do not fit one call.
type Reduce struct {
	// System is the reduce prompt's system message; empty means the job's.
	System string `yaml:"system"`
	// Task is the reduce template; {outputs} is a JSON array of outputs,
	// {level} and {group} number the call. Required.
	Task string `yaml:"task"`
	// OutputSchema is the schema of a reduce output, inline or a file.
	OutputSchema Schema `yaml:"output_schema"`
	// GroupSize caps the outputs per reduce call; zero means the default.
	GroupSize int `yaml:"group_size"`
	// MaxBytes caps the bytes of outputs per reduce call; zero means the
	// default.
	MaxBytes int `yaml:"max_bytes"`
	// Output is where the final output is written (resolved like the
	// job's output). Empty means next to the results: OUT.reduce.json, or
	// stdout when the results go to stdout.
	Output string `yaml:"output"`
}

// MCPServer is an MCP server whose tools the agents may call: a stdio
// command or a streamable-HTTP URL.
type MCPServer struct {
	// Name labels the server in errors. Required.
	Name string `yaml:"name"`
	// Command is the program and its arguments (stdio transport).
	Command []string `yaml:"command"`
	// Env adds "KEY=VALUE" entries to the command's environment.
	Env []string `yaml:"env"`
	// URL is a streamable-HTTP endpoint. Exactly one of Command and URL.
	URL string `yaml:"url"`
	// Tools restricts which of the server's tools are exposed; empty means
	// all.
	Tools []string `yaml:"tools"`
	// Cacheable marks the server's tools cacheable.
	Cacheable bool `yaml:"cacheable"`
	// ConnectTimeout bounds starting the server, the handshake and listing
	// its tools. Zero means the default.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// Policy limits each of the server's tools.
	Policy `yaml:",inline"`
}

// Limits are the engine limits of a job. The zero Limits means the engine
// defaults throughout; negative values are rejected by Parse.
type Limits struct {
	// MaxTurns caps the turns of one agent. Zero means the engine default (8).
	MaxTurns int `yaml:"max_turns"`
	// MaxInflight caps concurrent model requests. Zero means the engine
	// default.
	MaxInflight int `yaml:"max_inflight"`
	// MaxActive caps the agents alive at once. Zero means the engine default.
	MaxActive int `yaml:"max_active"`
	// MaxRetries caps the retries of one model request. Nil means the engine
	// default (2); a pointer to zero turns retries off.
	MaxRetries *int `yaml:"max_retries"`
	// Timeout bounds the run time of one agent. Zero means no timeout.
	Timeout Duration `yaml:"timeout"`
	// Backoff spaces the retries of failed model calls. Zero fields mean
	// the engine defaults.
	Backoff Backoff `yaml:"backoff"`
	// ProbeInterval is how often a self-hosted server's queue is read for
	// max_queued. Zero means the engine default (200ms).
	ProbeInterval Duration `yaml:"probe_interval"`
	// OutageBudget is how long one model request is retried while the
	// backend cannot answer (rate limits, overload, connection failures,
	// timeouts) before the agent fails. Zero means the engine default (5m).
	OutageBudget Duration `yaml:"outage_budget"`
	// FixedInflight keeps the inflight limit at max_inflight instead of
	// adapting it to the backend's throttling.
	FixedInflight bool `yaml:"fixed_inflight"`
	// RPM and TPM pace requests and tokens per minute. Zero means no limit
	// beyond what the backend reports.
	RPM int `yaml:"rpm"`
	TPM int `yaml:"tpm"`
	// MaxQueued pauses admission while a self-hosted server reports more
	// waiting requests than this. Zero means the engine default; -1 turns
	// the probe off.
	MaxQueued int `yaml:"max_queued"`
}

// Duration is a time.Duration written in YAML as a string such as "30s" or
// "2m". A bare number is refused, since its unit would be a guess.
type Duration time.Duration

// String returns the duration in time.Duration's format, such as "2m0s".
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML implements yaml.Unmarshaler. It accepts a string that
// time.ParseDuration accepts and returns an error for anything else.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf(`want a duration like "30s", got %s`, describe(n))
	}
	if n.ShortTag() != "!!str" {
		return fmt.Errorf(`invalid duration %s: want a duration like "30s"`, n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf(`invalid duration %q: want a duration like "30s"`, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler: a Duration marshals as its String.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Load reads and parses the job file at path, resolving relative paths
// against the file's directory. It returns an *Error listing every problem
// when the file is not a valid job, and another error when the file cannot
// be read.
func Load(path string) (*Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path, filepath.Dir(path))
}

// Parse parses the job file data. The name is used in messages and stored
// in Job.Path; dir is the directory against which relative paths (inputs,
// output, schema file, tool roots) are resolved, and may be relative to the
// working directory. Parse reads the schema file and checks the tool roots
// on disk. It parses the task templates and compiles the output schemas as
// the engine does, so that a mistake in one is reported at its position in
// the file before any agent runs.
//
// Parse returns an *Error listing every problem of the file, sorted by
// position, and a Job only when there are none. It is safe for concurrent
// use.
func Parse(data []byte, name, dir string) (*Job, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("config: resolve job directory: %w", err)
	}
	d := newDecoder(absDir)
	j := &Job{Dir: absDir, Path: name}
	if root := d.document(data); root != nil {
		d.value(root, "", reflect.ValueOf(j).Elem())
		d.validate(j, root)
	}
	if len(d.problems) > 0 {
		return nil, newError(name, d.problems)
	}
	return j, nil
}

// document parses data and returns the root mapping node, or nil after
// recording a problem when there is no usable document.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	switch {
	case errors.Is(err, io.EOF):
		d.add(Problem{Line: 1, Col: 1, Msg: `job file is empty; it needs at least "task"`})
		return nil
	case err != nil:
		d.syntax(err)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.add(Problem{Line: extra.Line, Col: extra.Column, Msg: "job file has more than one YAML document"})
	case !errors.Is(err, io.EOF):
		d.syntax(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if isNull(root) {
		d.add(Problem{Line: 1, Col: 1, Msg: `job file is empty; it needs at least "task"`})
		return nil
	}
	return root
}
