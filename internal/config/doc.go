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
