package agent_test

import (
	"fmt"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// ExampleRunner_Request shows the first request of a fresh agent without
// calling the model: the shared prefix (the system prompt with the output
// schema's instructions), then the agent's task.
func ExampleRunner_Request() {
	model, err := sim.New(sim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := schema.Compile([]byte(`{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := agent.New(agent.Config{Model: model, System: "You label reviews.", Schema: s, MaxTokens: 200})
	if err != nil {
		fmt.Println(err)
		return
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Label: great phone"}}}
	req := r.Request(st)
	for _, m := range req.Messages {
		fmt.Printf("%s: %.40q\n", m.Role, m.Content)
	}
	fmt.Println("output spec:", req.Output.Name, "· max tokens:", req.MaxTokens)
	fmt.Println("prefix only:", len(r.Request(&agent.State{}).Messages), "message")
	// Output:
	// system: "You label reviews.\n\nAnswer with a single"
	// user: "Label: great phone"
	// output spec: output · max tokens: 200
	// prefix only: 1 message
}
