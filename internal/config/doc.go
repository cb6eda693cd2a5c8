// Package config owns the job file format of the batchagent CLI: the YAML
// read by "batchagent run JOB.yaml".
//
// # Format
//
// A job file is one YAML mapping:
//
//	name: triage                  # optional label
//	model: gpt-4o-mini            # passed to the backend
//	backend: sim://?latency=60ms  # defaults to "sim://"
//	system: You label tickets.
//	task: "Label this ticket: {text}"
//	inputs: tickets.jsonl         # relative to the job file
//	output: labels.jsonl
//	output_schema:                # inline JSON Schema, or a path to a .json/.yaml file
//	  type: object
//	  required: [label]
//	  properties:
//	    label: {type: string}
//	tools:
//	  - name: read_file
//	    roots: [docs]
//	limits:
//	  max_turns: 4
//	  timeout: 2m                 # durations are strings
//
// # Engine knobs
//
// Every setting of the engine that a file can express has a key; a key left
// out keeps the engine's default ([Job] documents each):
//
//	max_tokens: 1024              # batchagent.Job.MaxTokens
//	max_tokens_limit: 4096        # Job.MaxTokensLimit: cap for retries of cut answers
//	temperature: 0                # Job.Temperature (sent even when 0)
//	top_p: 0.9                    # Job.TopP, 0 to 1
//	seed: 42                      # Job.Seed (OpenAI-compatible backends)
//	stop: [END]                   # Job.Stop
//	tool_pool:                    # tool.PoolConfig
//	  cache_size: 4096            # -1: no cache
//	  cache_ttl: 10m
//	  max_result_bytes: 65536     # -1: no cap
//	  timeout: 30s                # per execution, unless the tool sets one
//	limits:
//	  max_inflight: 8             # also max_active, max_retries, fixed_inflight,
//	  rpm: 600                    # tpm, max_queued, timeout
//	  backoff:                    # batchagent.Job.Backoff
//	    base: 50ms
//	    rate_limit_base: 1s
//	    max: 30s
//	  probe_interval: 200ms       # Job.Backpressure.Interval
//	tools:
//	  - name: http_get            # per tool: rate, burst, max_concurrent, timeout,
//	    max_redirects: -1         # no_coalesce, batch_window, batch_max (tool.Policy)
//	mcp:
//	  - name: files
//	    command: [mcp-files]
//	    connect_timeout: 1m
//
// What has no key is what a file cannot hold: functions (Job.Check,
// OnResult, RateLimit.CountTokens), the logger, and the checkpoint store
// and resume options, which are flags of "batchagent run".
//
// # Strictness
//
// Parsing is strict and reports every problem at once, each with its line,
// column and YAML path: unknown keys (with a suggestion for near misses),
// duplicate keys, values of the wrong kind or type, and semantic problems
// such as a missing task, an unknown tool or a root directory that does not
// exist. The problems come back as an [*Error]; its text has one
// "file:line:col: path: message" line per problem, which is what the CLI
// prints before it exits with status 2.
//
// yaml.v3's own strict mode (KnownFields) stops at the first problem and
// reports no columns, so the package decodes the file into a yaml.Node and
// walks it against the Go types itself; yaml.v3 still decodes every scalar.
// Anchors, aliases and merge keys ("<<") are supported.
package config
