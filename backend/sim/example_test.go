package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// The simulator first calls the request's tool, copying the path from the
// task, and answers in the output schema once the tool result is in.
func ExampleModel_Generate() {
	cfg, err := sim.ParseURL("sim://?seed=1")
	if err != nil {
		log.Fatal(err)
	}
	m, err := sim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	tools := []llm.ToolDef{{
		Name:        "read_file",
		Description: "Read a file.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	}}
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "Summarise path: README.md"}}

	resp, err := m.Generate(ctx, &llm.Request{Messages: msgs, Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	call := resp.Message.ToolCalls[0]
	fmt.Println(resp.FinishReason, call.ID, call.Name, string(call.Arguments))

	msgs = append(msgs, resp.Message, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: "# batchagent\nRuns agents in batches."})
	resp, err = m.Generate(ctx, &llm.Request{
		Messages: msgs,
		Tools:    tools,
		Output: &llm.OutputSpec{Name: "summary", Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"title": {"type": "string"},
				"lines": {"type": "integer", "minimum": 1, "maximum": 9},
				"audience": {"enum": ["users", "developers"]}
			},
			"required": ["title", "lines", "audience"]
		}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.FinishReason, resp.Message.Content)
	// Output:
	// tool_calls call_0_0 read_file {"path":"README.md"}
	// stop {"audience":"users","lines":5,"title":"lumen nova"}
}

func ExampleParseURL() {
	cfg, err := sim.ParseURL("sim://?latency=60ms&per_token=2ms&tool_turns=0&fail=0.02&seed=7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %v %d %v %d\n", cfg.Latency, cfg.PerToken, cfg.ToolTurns, cfg.FailRate, cfg.Seed)
	// Output:
	// 60ms 2ms -1 0.02 7
}
