package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/reduce"
)

// DefaultBackend is the backend URL a job uses when its file names none: the
// in-process simulator.
const DefaultBackend = "sim://"

// Job is a parsed job file, decoded straight into the engine's types: what
// to run in a job.Def, the engine's settings in a batchagent.Config, the
// tools' settings in their packages' config types. Relative paths in the
// file have been resolved against the directory of the job file, so every
// path in a Job returned by [Load] or [Parse] is absolute.
//
// What a file cannot hold is left for the caller: Def.Model (resolved
// from Backend), Def.Fallbacks (resolved from Fallbacks; a Go function
// tier has no key), Def.Tools and Def.ToolPool.Policies (built from Tools
// and MCP), Def.Check, and the Config's Checkpoint, OnResult, Logger and
// Admission.RateLimit.CountTokens.
//
// A Job is a plain value: the package never modifies one after returning
// it. It marshals to YAML (MarshalYAML) that parses back to the same Job.
type Job struct {
	// Def is what to run. Its ID is the file's name (empty when the file
	// has none), ModelName its model.
	Def job.Def
	// Engine holds the engine settings of the file: MaxActive and the
	// Admission of the job's backend. Admission.StartWindow is the shorter
	// of DefaultStartWindow and limits.outage_budget (NoStartWindow when
	// the budget is off), and Admission.PauseBackoff is limits.backoff,
	// as Def.Backoff: the file's back-off spaces the pauses of admission
	// after connection failures too.
	Engine batchagent.Config
	// Backend is the backend URL, such as "sim://?latency=60ms&tool_turns=1".
	// Defaults to DefaultBackend. With Deployments it is the first
	// deployment's URL: the one whose prices and tokenizer the job uses.
	Backend string
	// Deployments, when the file's backend is a mapping of deployments
	// rather than a URL, are several deployments of the job's model: each
	// call goes to the least-loaded healthy one (see OpenDeployments).
	// Empty means one backend, Backend.
	Deployments []Deployment
	// Cooldown is how long a failing deployment's breaker stays open
	// before a probe. Zero means the router's default (5s).
	Cooldown time.Duration
	// APIKeyEnv names the environment variable holding the backend's API
	// key. Empty means the backend's usual one (OPENAI_API_KEY,
	// ANTHROPIC_API_KEY). Keys are never written in job files.
	APIKeyEnv string
	// Fallbacks are the backends of the job's fallback tiers, in order:
	// the caller opens each into a job.Fallback of Def.Fallbacks, tier 1
	// first. Empty means none. Def.Budget, when set, is only valid with
	// fallbacks.
	Fallbacks []FallbackBackend
	// Inputs is the absolute path of a .jsonl or .csv input file. Empty means
	// the inputs come from elsewhere (a flag).
	Inputs string
	// Output is the absolute path of the default output file. Empty means
	// none.
	Output string
	// SchemaFile is the absolute path of the output schema's file when
	// output_schema names one; Def.OutputSchema holds the schema either
	// way.
	SchemaFile string
	// Tools are the built-in tools the agents may call. Empty means none.
	Tools []Tool
	// MCP lists MCP servers whose tools the agents may call.
	MCP []MCPServer
	// Reduce, when set, combines the outputs once the inputs are done.
	Reduce *Reduce
	// Media says where the media of the task's image, audio and file
	// items may come from (Def.Media holds the items). Nil when the file
	// has neither; a task with media items and no media key gets the job
	// file's directory as its one root. The caller builds Def.MediaLoader
	// from it.
	Media *MediaConfig
	// Pricing is what the model's tokens cost, per million (the file's
	// pricing: input, cached_input, output and cache_write; BatchDiscount is not set
	// by a file). Nil means the file sets none: `batchagent run` then
	// looks the model up in its table of prices.
	Pricing *llm.Price
	// MaxCost is limits.max_cost: the most the run may spend on model
	// calls, in dollars, counting the results a resumed run restores.
	// Zero means no cap. It is not part of the job's fingerprint: a run
	// stopped at the cap resumes with a higher one.
	MaxCost float64
	// Cache is the file's cache key: where answers of earlier model
	// calls are reused from, or Off. Nil means the file has none: the
	// run's default applies (see internal/jobrun).
	Cache *CacheConfig
	// Delivery is the file's delivery key: batch sends the model calls
	// through the provider's batch API. Nil means the file has none: real
	// time, unless the backend URL says ?mode=batch (see BatchDelivery).
	Delivery *DeliveryConfig

	// Dir is the absolute directory of the job file; relative paths are
	// resolved against it.
	Dir string
	// Path is the job file path as given to Load, or the name given to Parse.
	Path string
}

// keys is the table of the job file's keys: each names the field of the
// engine's types that its value goes to.
func (j *Job) keys() keys {
	d, a := &j.Def, &j.Engine.Admission
	return keys{
		{"name", &d.ID},
		{"model", &d.ModelName},
		{"backend", backendField{j}},
		{"api_key_env", &j.APIKeyEnv},
		{"fallbacks", &j.Fallbacks},
		{"system", &d.System},
		{"task", taskField{&d.Task, &d.Media}},
		{"media", &j.Media},
		{"inputs", &j.Inputs},
		{"output", &j.Output},
		{"output_schema", schemaField{&d.OutputSchema, &j.SchemaFile}},
		{"tools", &j.Tools},
		{"mcp", &j.MCP},
		{"limits", keys{
			{"max_turns", &d.MaxTurns},
			{"max_inflight", &a.MaxInflight},
			{"max_active", &j.Engine.MaxActive},
			{"max_retries", offInt{v: &d.MaxRetries, off: &d.NoRetries, zeroOff: true}},
			{"timeout", &d.Timeout},
			{"budget", &d.Budget},
			{"backoff", keys{{"base", &d.Backoff.Base}, {"rate_limit_base", &d.Backoff.RateLimitBase}, {"max", &d.Backoff.Max}}},
			{"probe_interval", &a.Backpressure.Interval},
			{"outage_budget", offDuration{&d.OutageBudget, &d.NoOutageBudget}},
			{"fixed_inflight", &a.FixedInflight},
			{"rpm", &a.RateLimit.RPM},
			{"tpm", &a.RateLimit.TPM},
			{"otpm", &a.RateLimit.OTPM},
			{"max_queued", offInt{v: &a.Backpressure.MaxQueued, off: &a.Backpressure.Disabled, minusOne: true}},
			{"policy", &a.Policy},
			{"continuation", offDuration{v: &a.Continuation}},
			{"max_cost", &j.MaxCost},
		}},
		{"max_tokens", &d.MaxTokens},
		{"max_tokens_limit", &d.MaxTokensLimit},
		{"context_window", &d.ContextWindow},
		{"temperature", &d.Temperature},
		{"top_p", &d.TopP},
		{"seed", &d.Seed},
		{"stop", &d.Stop},
		{"tool_pool", keys{
			{"cache_size", offInt{v: &d.ToolPool.CacheSize, offValue: -1, minusOne: true}},
			{"cache_ttl", &d.ToolPool.CacheTTL},
			{"max_result_bytes", offInt{v: &d.ToolPool.MaxResultBytes, offValue: -1, minusOne: true}},
			{"max_media_bytes", sizeField{&d.ToolPool.MaxMediaBytes}},
			{"timeout", &d.ToolPool.Timeout},
		}},
		{"warm_prefix", &a.WarmPrefix},
		{"pack", packField{&d.Pack}},
		{"reduce", &j.Reduce},
		{"pricing", pricingField{&j.Pricing}},
		{"cache", cacheField{&j.Cache}},
		{"delivery", deliveryField{&j.Delivery}},
	}
}

// MarshalYAML implements yaml.Marshaler: the job file of j, with the keys
// that are set, which [Parse] reads back as the same Job.
func (j Job) MarshalYAML() (any, error) {
	n, err := encodeTable(j.keys())
	if err != nil {
		return nil, fmt.Errorf("config: marshal job: %w", err)
	}
	if n == nil {
		return map[string]any{}, nil
	}
	return n, nil
}

// Reduce is a job's reduce step: a prompt over the map outputs, applied
// hierarchically when they do not fit one call.
type Reduce struct {
	// Config is the reduce step as reduce.Outputs takes it.
	Config reduce.Config
	// SchemaFile is the absolute path of the reduce output schema's file,
	// when reduce.output_schema names one.
	SchemaFile string
	// Output is where the final output is written (resolved like the
	// job's output). Empty means next to the results: OUT.reduce.json, or
	// stdout when the results go to stdout.
	Output string
}

func (r *Reduce) keys() keys {
	c := &r.Config
	return keys{
		{"system", &c.System},
		{"task", &c.Task},
		{"output_schema", schemaField{&c.OutputSchema, &r.SchemaFile}},
		{"group_size", &c.GroupSize},
		{"max_bytes", &c.MaxBytes},
		{"output", &r.Output},
	}
}

// schemaField is an output schema: written inline as YAML, or as the path
// of a .json or .yaml file. It decodes into the schema's JSON and, for a
// file, its absolute path.
type schemaField struct {
	json *json.RawMessage
	file *string
}

func (f schemaField) decode(d *decoder, n *yaml.Node, path string) {
	var s schemaSource
	d.schema(n, path, &s)
	*f.json, *f.file = s.JSON, s.File
}

func (f schemaField) encode() (any, error) {
	return schemaSource{JSON: *f.json, File: *f.file}.marshal()
}

// schemaSource holds an output schema as JSON, and the file it came from.
type schemaSource struct {
	// JSON is the schema as compact JSON, with object keys in the order of
	// the file. A YAML mapping is converted to JSON: keys must be strings,
	// YAML integers stay integers and other scalars map to their JSON
	// counterparts.
	JSON json.RawMessage
	// File is the absolute path of the schema file when the schema was given
	// as a path, and empty when it was written inline.
	File string
}

// marshal returns what a schema marshals as: its path when it came from a
// file, an inline one as a mapping in flow style, nil for none.
func (s schemaSource) marshal() (any, error) {
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
		d.into(root, "", j.keys())
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
