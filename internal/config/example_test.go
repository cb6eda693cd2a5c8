package config_test

import (
	"errors"
	"fmt"

	"github.com/batchagent/batchagent/internal/config"
)

func ExampleParse() {
	const job = `
name: triage
backend: sim://?latency=60ms
task: "Label this ticket: {text}"
inputs: tickets.jsonl
output_schema:
  type: object
  required: [label]
  properties:
    label: {type: string, enum: [bug, feature]}
limits:
  max_turns: 4
  timeout: 2m
`
	j, err := config.Parse([]byte(job), "triage.yaml", "/jobs")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("name:", j.Def.ID)
	fmt.Println("backend:", j.Backend)
	fmt.Println("task:", j.Def.Task)
	fmt.Println("inputs:", j.Inputs)
	fmt.Println("schema:", string(j.Def.OutputSchema))
	fmt.Println("max turns:", j.Def.MaxTurns)
	fmt.Println("timeout:", j.Def.Timeout)
	// Output:
	// name: triage
	// backend: sim://?latency=60ms
	// task: Label this ticket: {text}
	// inputs: /jobs/tickets.jsonl
	// schema: {"type":"object","required":["label"],"properties":{"label":{"type":"string","enum":["bug","feature"]}}}
	// max turns: 4
	// timeout: 2m0s
}

func ExampleError() {
	const job = `
taks: "Label this ticket: {text}"
limits:
  max_turns: many
  timeout: 30
tools:
  - name: web_search
`
	_, err := config.Parse([]byte(job), "triage.yaml", "/jobs")
	var ce *config.Error
	if errors.As(err, &ce) {
		fmt.Println(len(ce.Problems), "problems:")
		fmt.Println(err)
	}
	// Output:
	// 5 problems:
	// triage.yaml:2:1: taks: unknown key "taks" (did you mean "task"?)
	// triage.yaml:2:1: task: required key is missing
	// triage.yaml:4:14: limits.max_turns: cannot unmarshal !!str `many` into int
	// triage.yaml:5:12: limits.timeout: invalid duration 30: want a duration like "30s"
	// triage.yaml:7:11: tools[0].name: unknown tool "web_search"; known tools: http_get, list_dir, read_file, sql_lookup, sql_query
}
