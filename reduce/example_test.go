package reduce_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/reduce"
)

// ExampleRun summarises 25 papers, then combines the summaries five at a
// time: five reduce calls at level 1, one at level 2.
func ExampleRun() {
	model, err := sim.New(sim.Config{Seed: 7, ToolTurns: -1})
	if err != nil {
		panic(err)
	}
	const summary = `{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID:           "papers",
		Model:        model,
		Task:         "Summarise paper {id}.",
		OutputSchema: json.RawMessage(summary),
	})
	if err != nil {
		panic(err)
	}
	inputs := make([]batchagent.Input, 25)
	for i := range inputs {
		inputs[i] = batchagent.Input{"id": i}
	}
	cfg := reduce.Config{
		Task:         "Combine these summaries into one: {outputs}",
		OutputSchema: json.RawMessage(summary), // a reduce output is reduced again
		GroupSize:    5,
	}
	results, rr, err := reduce.Run(context.Background(), nil, spec, batchagent.Slice(inputs), cfg)
	if err != nil {
		panic(err)
	}
	var out struct {
		Summary string `json:"summary"`
	}
	if err := json.Unmarshal(rr.Output, &out); err != nil {
		panic(err)
	}
	fmt.Printf("mapped %d, reduced %d in %d calls over %d levels, summary %t\n",
		len(results), rr.Reduced, rr.Calls, rr.Levels, out.Summary != "")
	// Output:
	// mapped 25, reduced 25 in 6 calls over 2 levels, summary true
}
