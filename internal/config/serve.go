package config

import (
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultServeAddr is the address `batchagent serve` listens on when its
// config names none.
const DefaultServeAddr = "127.0.0.1:8080"

// Serve is a parsed serve config file, for `batchagent serve`: the
// listen address, the backend models served as passthrough, the agents,
// the API keys and the limits. Like a job file it is decoded strictly:
// unknown keys and wrong types are problems, all reported at once with
// their positions.
//
//	addr: 127.0.0.1:8080
//	request_timeout: 5m
//	max_body_bytes: 8388608
//	header_timeout: 10s           # a request's headers must come within it
//	body_timeout: 1m              # its body, after them (else 408)
//	idle_timeout: 1m              # a kept-alive connection waits this long for its next request
//	max_connections: 1024         # open at once (-1: unlimited); over it: 503
//	max_connections_per_client: 256   # from one address (-1: unlimited); over it: 429
//	shutdown_grace: 10m           # on SIGTERM, what has begun may finish within it (default: request_timeout)
//	batch:                        # the Batch API's limits
//	  max_lines: 50000
//	  max_bytes: 209715200
//	  concurrency: 64             # lines of one batch running at once
//	  upload_timeout: 10m         # body_timeout for a file upload
//	backends:
//	  local:                      # the model name clients ask for
//	    url: sim://?seed=1         # a backend URL, as a job file's backend
//	    model: ""                  # the model name sent upstream
//	    api_key_env: ""            # as a job file's api_key_env
//	    max_inflight: 32           # admission, as a job file's limits
//	    rpm: 0
//	    tpm: 0
//	  gpt:                        # or several deployments of one model
//	    model: gpt-4o-mini
//	    deployments:              # the least-loaded healthy one gets each call
//	      - {url: "https://eu.example.com/v1", api_key_env: EU_KEY, max_inflight: 64, weight: 2}
//	      - {url: "https://us.example.com/v1", api_key_env: US_KEY, max_inflight: 32, rpm: 600}
//	    cooldown: 5s               # a failing deployment's breaker stays open this long
//	trace_content: false          # record prompts and answers in spans (input.value, output.value)
//	keys:
//	  - name: ci
//	    env: BATCHAGENT_CI_KEY     # or sha256: <hex SHA-256 of the key>
//	    max_concurrent: 4
//	    rpm: 600
//	    max_cost: 25               # dollars; then 429 budget_exceeded (per process)
//	agents:
//	  reviewer:                    # served as model "agent:reviewer"
//	    backend: sim://?seed=1     # the keys of a job file
//	    task: "Review: {input}"
//	prices:                        # per million tokens: usage then has "cost"; overrides the built-in table for max_cost
//	  agent:reviewer: {input: 0.15, cached_input: 0.075, output: 0.6, cache_write: 0.1875}
//
// An agent is a job file's keys (inputs, output and reduce aside, which a
// gateway does not use); an agent whose backend URL and model equal a
// served backend's shares that backend, and so its admission.
type Serve struct {
	// Addr is the listen address. Defaults to DefaultServeAddr.
	Addr string
	// RequestTimeout bounds each request. Zero means the server's default.
	RequestTimeout time.Duration
	// MaxBodyBytes caps a request body. Zero means the server's default.
	MaxBodyBytes int64
	// HeaderTimeout, BodyTimeout and IdleTimeout bound a request's
	// headers, its body and a kept-alive connection's wait for its next
	// request. Zero means the server's defaults (10s, 1m, 1m).
	HeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	// MaxConnections and MaxConnectionsPerClient cap the connections open
	// at once, in all and from one client address. Zero means the
	// server's defaults (1024, 256); negative means unlimited.
	MaxConnections, MaxConnectionsPerClient int
	// ShutdownGrace is how long, once SIGINT or SIGTERM came, the requests
	// whose answer has begun may take to finish. Zero means
	// RequestTimeout (or the server's default of it).
	ShutdownGrace time.Duration
	// Backends are the models served as passthrough, in file order.
	Backends []ServeBackend
	// Keys are the API keys accepted. Empty means no authentication.
	Keys []ServeKey
	// Agents are the agents served, in file order.
	Agents []ServeAgent
	// Prices are the prices of models (a backend's name, or
	// "agent:NAME"), per million tokens, in file order. Empty means no
	// cost is reported.
	Prices []ServePrice
	// Batch holds the Batch API's limits. Zero fields mean the server's
	// defaults.
	Batch ServeBatch
	// TraceContent records prompts and answers in the spans
	// (OpenInference input.value, output.value), as `batchagent run`'s
	// content switch. Defaults to false: names, token counts and errors
	// only.
	TraceContent bool
	// Dir is the absolute directory of the file; Path the file as given.
	Dir, Path string
}

// ServeBackend is one backend model of a serve file.
type ServeBackend struct {
	// Name is the model name clients ask for (the key in the file).
	Name string
	// URL is the backend URL, as a job file's backend. Required.
	URL string
	// Model is the model name sent upstream. Defaults to none (the
	// backend's default).
	Model string
	// APIKeyEnv names the variable of the backend's key, as in a job file.
	APIKeyEnv string
	// MaxInflight, FixedInflight, RPM and TPM set the backend's admission,
	// as a job file's limits. Zero means the defaults.
	MaxInflight   int
	FixedInflight bool
	RPM, TPM      int
	// Deployments, when set instead of URL, are several deployments of
	// the model: each call goes to the least-loaded healthy one (package
	// router). MaxInflight, RPM and TPM then cap them all together.
	Deployments []Deployment
	// Cooldown is how long a failing deployment's breaker stays open
	// before a probe. Zero means the router's default (5s).
	Cooldown time.Duration
}

func (b *ServeBackend) keys() keys {
	return keys{
		{"deployments", &b.Deployments},
		{"cooldown", &b.Cooldown},
		{"url", &b.URL},
		{"model", &b.Model},
		{"api_key_env", &b.APIKeyEnv},
		{"max_inflight", &b.MaxInflight},
		{"fixed_inflight", &b.FixedInflight},
		{"rpm", &b.RPM},
		{"tpm", &b.TPM},
	}
}

// ServeKey is one API key of a serve file: its SHA-256, or the variable
// that holds it. Keys are never written in the file.
type ServeKey struct {
	// Name names the key in logs. Defaults to the server's default.
	Name string
	// SHA256 is the hex SHA-256 of the key; exactly one of SHA256 and Env
	// is set.
	SHA256 string
	// Env names the environment variable holding the key.
	Env string
	// MaxConcurrent and RPM are the key's limits. Zero means unlimited.
	MaxConcurrent, RPM int
	// MaxCost caps, in dollars, what the key's model calls may cost (see
	// server.Key.MaxCost). Zero means no cap; otherwise a finite number >
	// 0.
	MaxCost float64
}

func (k *ServeKey) keys() keys {
	return keys{
		{"name", &k.Name},
		{"sha256", &k.SHA256},
		{"env", &k.Env},
		{"max_concurrent", &k.MaxConcurrent},
		{"rpm", &k.RPM},
		{"max_cost", &k.MaxCost},
	}
}

// ServePrice is the price of one model's tokens, per million.
type ServePrice struct {
	// Model is the model name clients ask for (the key in the file).
	Model string
	// Input, CachedInput, Output and CacheWrite are the prices of a
	// million uncached prompt, cached prompt, completion and cache-written
	// prompt tokens. CachedInput and CacheWrite default to Input.
	Input, CachedInput, Output, CacheWrite float64
}

func (p *ServePrice) keys() keys {
	return keys{{"input", &p.Input}, {"cached_input", &p.CachedInput}, {"output", &p.Output}, {"cache_write", &p.CacheWrite}}
}

// servePrices decodes the prices mapping, in file order.
type servePrices struct{ s *Serve }

func (f servePrices) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "expected a mapping of model names to prices, got %s", describe(n))
		return
	}
	for _, e := range d.entries(n, path) {
		p := ServePrice{Model: e.key.Value}
		d.into(e.value, join(path, e.key.Value), &p)
		if p.Input < 0 || p.CachedInput < 0 || p.Output < 0 || p.CacheWrite < 0 {
			d.report(e.value, join(path, e.key.Value), "negative price")
		}
		f.s.Prices = append(f.s.Prices, p)
	}
}

func (f servePrices) encode() (any, error) { return nil, nil }

// ServeAgent is one agent of a serve file.
type ServeAgent struct {
	// Name is the agent's name: clients ask for model "agent:NAME".
	Name string
	// Job holds the agent's job-file keys.
	Job *Job
}

// ServeBatch holds the limits of the Batch API of `batchagent serve`.
type ServeBatch struct {
	// MaxLines caps a batch's input lines. Zero means the server's
	// default (50,000).
	MaxLines int
	// MaxBytes caps an uploaded file. Zero means the server's default
	// (200 MB).
	MaxBytes int64
	// Concurrency caps the lines of one batch running at once. Zero means
	// the server's default.
	Concurrency int
	// UploadTimeout bounds the body of a file upload. Zero means the
	// server's default (10m).
	UploadTimeout time.Duration
}

func (s *Serve) keys() keys {
	return keys{
		{"addr", &s.Addr},
		{"request_timeout", &s.RequestTimeout},
		{"max_body_bytes", &s.MaxBodyBytes},
		{"header_timeout", &s.HeaderTimeout},
		{"body_timeout", &s.BodyTimeout},
		{"idle_timeout", &s.IdleTimeout},
		{"max_connections", &s.MaxConnections},
		{"max_connections_per_client", &s.MaxConnectionsPerClient},
		{"shutdown_grace", &s.ShutdownGrace},
		{"trace_content", &s.TraceContent},
		{"backends", serveBackends{s}},
		{"keys", &s.Keys},
		{"agents", serveAgents{s}},
		{"prices", servePrices{s}},
		{"batch", keys{
			{"max_lines", &s.Batch.MaxLines},
			{"max_bytes", &s.Batch.MaxBytes},
			{"concurrency", &s.Batch.Concurrency},
			{"upload_timeout", &s.Batch.UploadTimeout},
		}},
	}
}

// serveBackends decodes the backends mapping, in file order.
type serveBackends struct{ s *Serve }

func (f serveBackends) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "expected a mapping of model names to backends, got %s", describe(n))
		return
	}
	for _, e := range d.entries(n, path) {
		b := ServeBackend{Name: e.key.Value}
		p := join(path, e.key.Value)
		d.into(e.value, p, &b)
		switch {
		case d.bad[p]:
		case b.URL == "" && len(b.Deployments) == 0:
			d.report(e.value, p+".url", "required key is missing (a backend URL, such as \"sim://\"; or deployments)")
		case b.URL != "" && len(b.Deployments) > 0:
			d.report(e.value, p, "set url or deployments, not both")
		}
		d.checkDeployments(e.value, p, b.Deployments, b.Cooldown)
		f.s.Backends = append(f.s.Backends, b)
	}
}

func (f serveBackends) encode() (any, error) { return nil, nil }

// serveAgents decodes the agents mapping, each agent as a job file.
type serveAgents struct{ s *Serve }

func (f serveAgents) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "expected a mapping of agent names to agents, got %s", describe(n))
		return
	}
	for _, e := range d.entries(n, path) {
		p := join(path, e.key.Value)
		if e.value.Kind != yaml.MappingNode {
			d.problem(e.value, p, "expected an agent (the keys of a job file), got %s", describe(e.value))
			continue
		}
		// Each agent is a job file of its own: its own decoder, whose
		// problems are reported under the agent's path.
		sub := newDecoder(d.dir)
		j := &Job{Dir: d.dir, Path: d.dir}
		sub.into(e.value, "", j.keys())
		sub.validate(j, e.value)
		for _, pr := range sub.problems {
			pr.Path = join(p, pr.Path)
			d.add(pr)
		}
		if len(j.Deployments) > 0 {
			d.report(sub.at("backend"), join(p, "backend"), "an agent of the gateway takes one backend URL, not deployments")
		}
		for _, key := range []string{"inputs", "output", "reduce"} {
			if sub.nodes[key] != nil && !isNull(sub.nodes[key]) {
				d.report(sub.nodes[key], join(p, key), "an agent of the gateway takes no %s", key)
			}
		}
		f.s.Agents = append(f.s.Agents, ServeAgent{Name: e.key.Value, Job: j})
	}
}

func (f serveAgents) encode() (any, error) { return nil, nil }

// LoadServe reads and parses the serve config file at path. It returns an
// *Error listing every problem when the file is not valid, and another
// error when it cannot be read.
func LoadServe(path string) (*Serve, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseServe(data, path, filepath.Dir(path))
}

// ParseServe parses the serve config file data; name is used in messages,
// dir resolves relative paths (of the agents' tools and schemas).
func ParseServe(data []byte, name, dir string) (*Serve, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("config: resolve serve directory: %w", err)
	}
	d := newDecoder(absDir)
	s := &Serve{Dir: absDir, Path: name}
	if root := d.document(data); root != nil {
		d.into(root, "", s.keys())
		d.validateServe(s, root)
	}
	if len(d.problems) > 0 {
		return nil, newError(name, d.problems)
	}
	if s.Addr == "" {
		s.Addr = DefaultServeAddr
	}
	return s, nil
}

func (d *decoder) validateServe(s *Serve, root *yaml.Node) {
	if s.Addr != "" && d.ok("addr") {
		if _, _, err := net.SplitHostPort(s.Addr); err != nil {
			d.report(d.at("addr"), "addr", "want HOST:PORT, got %s", quote(s.Addr))
		}
	}
	if s.RequestTimeout < 0 && d.ok("request_timeout") {
		d.report(d.at("request_timeout"), "request_timeout", "must not be negative")
	}
	if s.MaxBodyBytes < 0 && d.ok("max_body_bytes") {
		d.report(d.at("max_body_bytes"), "max_body_bytes", "must not be negative")
	}
	for _, t := range []struct {
		key string
		v   time.Duration
	}{{"header_timeout", s.HeaderTimeout}, {"body_timeout", s.BodyTimeout}, {"idle_timeout", s.IdleTimeout}, {"shutdown_grace", s.ShutdownGrace}} {
		if t.v < 0 && d.ok(t.key) {
			d.report(d.at(t.key), t.key, "must not be negative")
		}
	}
	if s.Batch.UploadTimeout < 0 && d.ok("batch") {
		d.report(d.at("batch"), "batch.upload_timeout", "must not be negative")
	}
	if (s.Batch.MaxLines < 0 || s.Batch.MaxBytes < 0 || s.Batch.Concurrency < 0) && d.ok("batch") {
		d.report(d.at("batch"), "batch", "max_lines, max_bytes and concurrency must not be negative")
	}
	for i, k := range s.Keys {
		p := fmt.Sprintf("keys[%d]", i)
		if !d.ok(p) {
			continue
		}
		n := d.at(p)
		switch sum, err := hex.DecodeString(k.SHA256); {
		case (k.SHA256 == "") == (k.Env == ""):
			d.report(n, p, "set exactly one of sha256 (the key's hex SHA-256) and env (the variable holding the key)")
		case k.SHA256 != "" && (err != nil || len(sum) != 32):
			d.report(n, p+".sha256", "want 64 hex digits (the key's SHA-256)")
		}
		if k.MaxConcurrent < 0 || k.RPM < 0 {
			d.report(n, p, "negative limit (max_concurrent %d, rpm %d)", k.MaxConcurrent, k.RPM)
		}
		if mc := k.MaxCost; mc != 0 && (!(mc > 0) || math.IsInf(mc, 0)) && d.ok(p+".max_cost") {
			d.report(d.at(p+".max_cost"), p+".max_cost", "must be a finite number of dollars > 0 (or absent: no cap), got %v", mc)
		}
	}
	for _, b := range s.Backends {
		if b.MaxInflight < 0 || b.RPM < 0 || b.TPM < 0 {
			d.report(root, "backends."+b.Name, "negative limit (max_inflight %d, rpm %d, tpm %d)", b.MaxInflight, b.RPM, b.TPM)
		}
	}
	if len(s.Backends) == 0 && len(s.Agents) == 0 {
		d.report(root, "", "nothing to serve: name backends or agents")
	}
}
