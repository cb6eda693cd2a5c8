// Package config owns the job file format of the batchagent CLI: the YAML
// read by "batchagent run JOB.yaml", and the serve config file of
// "batchagent serve".
//
// It also opens what a file names: a backend URL into an llm.Model
// ([OpenBackend], each fallback tier's with [OpenFallbacks]), a job's
// tools and MCP servers into a [ToolSet] ([Job.OpenTools]), and a serve
// config into a [Gateway] on a new engine, with its agents, keys, prices,
// metrics and tracing ([Serve.Open]). The CLI reads flags, calls these
// and prints.
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
// The file decodes straight into the engine's types: what to run into a
// job.Def, engine settings into a batchagent.Config, each tool's settings
// into its package's config (filetool, httptool, sqltool), from one table
// of keys; a tool is one entry of the table of tools. Every setting of
// the engine that a file can express has a key; a key left out keeps the
// engine's default (job.Def and batchagent.Config document each):
//
//	max_tokens: 1024              # Def.MaxTokens
//	max_tokens_limit: 4096        # Def.MaxTokensLimit: cap for retries of cut answers
//	context_window: 8192          # Def.ContextWindow: compact conversations to fit it
//	temperature: 0                # Def.Temperature (sent even when 0)
//	top_p: 0.9                    # Def.TopP, 0 to 1
//	seed: 42                      # Def.Seed (OpenAI-compatible backends)
//	stop: [END]                   # Def.Stop
//	warm_prefix: true             # Config.Admission.WarmPrefix
//	pricing:                      # Job.Pricing, per million tokens; not negative
//	  input: 2.5
//	  cached_input: 1.25          # defaults to input
//	  output: 10
//	  cache_write: 3.125          # prompt tokens written to the cache; defaults to input
//	delivery: batch               # Job.Delivery: calls through the provider's batch API; or
//	                              # {mode: batch, linger: 30s, poll_every: 1m, min_lines: 1000,
//	                              #  max_enqueued_tokens: 2000000}; realtime (the default)
//	cache:                        # Job.Cache: the response cache; off: none
//	  path: answers.db            # default: the user cache directory's batchagent/responses.db
//	  ttl: 720h
//	pack:                         # Def.Pack: agents share model calls (no tools or mcp);
//	                              # or auto (also true): the engine chooses, up to 20 a call
//	  max_agents: 20              # per call, 2 or more; left out: auto, up to 20
//	  max_prompt_tokens: 4000     # per call; defaults to job.DefaultPackPromptTokens
//	  auto: true                  # the engine chooses whether and how much to pack
//	  verify: 0.02                # share of packed answers checked against one alone
//	  min_agreement: 0.9          # below it (checked answers), packs shrink
//	fallbacks:                    # Job.Fallbacks: tiers tried in order, opened into Def.Fallbacks
//	  - backend: sim://           # required, as the job's backend
//	    model: small              # optional, as the job's model
//	    api_key_env: FALLBACK_KEY # optional, as the job's api_key_env
//	tool_pool:                    # Def.ToolPool (tool.PoolConfig)
//	  cache_size: 4096            # off: no cache
//	  cache_ttl: 10m
//	  max_result_bytes: 65536     # off: no cap
//	  max_media_bytes: 20MB       # a result's images and PDFs (tool.PoolConfig.MaxMediaBytes)
//	  timeout: 30s                # per execution, unless the tool sets one
//	limits:
//	  max_turns: 8                # Def.MaxTurns
//	  max_retries: 2              # Def.MaxRetries; off (or 0): none
//	  timeout: 2m                 # Def.Timeout, per agent
//	  budget: 2s                  # Def.Budget: then a fallback answers; needs fallbacks
//	  outage_budget: 5m           # Def.OutageBudget; off: outages get max_retries only
//	  max_active: 1024            # Config.MaxActive
//	  max_inflight: 8             # Config.Admission.MaxInflight; also fixed_inflight
//	  rpm: 600                    # Config.Admission.RateLimit; also tpm and otpm (output tokens)
//	  max_cost: 25                # Job.MaxCost: dollars; no call starts past it
//	  max_queued: 4               # Config.Admission.Backpressure; off: no queue probe
//	  probe_interval: 200ms       # Config.Admission.Backpressure.Interval
//	  policy: fifo                # Config.Admission.Policy: fifo, turns or las
//	  continuation: 2s            # Config.Admission.Continuation; off (the default): none
//	  backoff:                    # Def.Backoff and Config.Admission.PauseBackoff
//	    base: 50ms
//	    rate_limit_base: 1s
//	    max: 30s
//	tools:
//	  - name: http_get            # per tool: rate, burst, max_concurrent, timeout,
//	    max_redirects: off        # no_coalesce, batch_window, batch_max (tool.Policy)
//	mcp:
//	  - name: files
//	    command: [mcp-files]
//	    connect_timeout: 1m
//
// limits.outage_budget also bounds how long a run waits for a backend that
// never answered before it stops with the backend unavailable
// (Admission.StartWindow: the shorter of 10s and the budget; none when the
// budget is off), and limits.backoff also spaces the pauses of admission
// after connection failures.
//
// # Turning a setting off
//
// A setting that can be turned off takes the word off: max_retries,
// outage_budget, max_queued, cache_size, max_result_bytes and
// max_redirects. For max_retries, 0 means off too. Older files wrote -1 for
// off (max_queued, cache_size, max_result_bytes, max_redirects): -1 is
// still read as off, but it is deprecated; write off. Other negative
// numbers are refused.
//
// What has no key is what a file cannot hold: functions (Def.Check, a
// Go function tier of Def.Fallbacks, OnResult, RateLimit.CountTokens), the
// models (OpenBackend and OpenFallbacks open backend and each fallback's backend),
// the logger, and the checkpoint store and resume options, which are
// flags of "batchagent run".
//
// # Fallbacks and budget
//
// A job with fallbacks gives each agent a time budget: limits.budget, else
// the CLI's BATCHAGENT_BUDGET, else job.DefaultBudget (60s); the file wins
// over the environment. Once the budget runs out, or a tier fails on its
// backend, the next tier answers. A budget without fallbacks would do
// nothing, so it is refused; limits.timeout bounds an agent with all its
// tiers. Each fallback's backend is opened as the job's own is, with its
// own model and api_key_env; the --backend flag replaces only the job's.
//
// # Deployments
//
// A job's backend may be several deployments of its model instead of one
// URL, as a serve file's backend may (package router; OpenDeployments):
//
//	backend:
//	  deployments:                # each call goes to the least-loaded healthy one
//	    - {name: gpu1, url: "http://gpu1:8000/v1", max_inflight: 64}
//	    - {url: "http://gpu2:8000/v1", api_key_env: GPU2_KEY, max_inflight: 32, weight: 0.5}
//	  cooldown: 5s                # a failing deployment's breaker stays open this long
//
// Each deployment keeps its own admission (max_inflight, fixed_inflight,
// rpm); the job's limits.max_inflight caps them together. The first
// deployment's URL is Job.Backend: the one whose prices and tokenizer the
// job uses. The --backend flag replaces the deployments as it replaces a
// URL. Batch delivery goes through one provider account and is refused
// with deployments; fallback tiers take one URL each.
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
// walks it against its table of keys itself; yaml.v3 still decodes every
// scalar.
// Anchors, aliases and merge keys ("<<") are supported.
package config
