package batchagent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// Example_spans reads where each agent's time went, turn by turn: the
// spans of a result (a timeline's bars), next to its totals.
func Example_spans() {
	model, err := sim.New(sim.Config{Seed: 42}) // one tool turn, then the answer
	if err != nil {
		panic(err)
	}
	lookup := tool.Func(tool.Spec{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) { return "in stock", nil })
	spec, err := batchagent.NewSpec(batchagent.Def{
		Model: model, Task: "Is {product} in stock?", Tools: []tool.Tool{lookup},
		OutputSchema: json.RawMessage(ratingSchema),
	})
	if err != nil {
		panic(err)
	}
	results, err := batchagent.Run(context.Background(), spec, batchagent.Slice([]batchagent.Input{{"product": "kettle"}}))
	if err != nil {
		panic(err)
	}
	r := results[0]
	for _, sp := range r.Spans {
		// Each span starts when the turn was ready for its model call.
		fmt.Printf("turn %d: tier %d, started with the agent or after: %v\n",
			sp.Turn, sp.Tier, !sp.Start.Before(r.Started))
	}
	inference, tools := r.Spans[0].Inference+r.Spans[1].Inference, r.Spans[0].Tools+r.Spans[1].Tools
	fmt.Println("spans add up to the totals:", inference == r.Timings.Inference && tools == r.Timings.Tools)
	// Output:
	// turn 0: tier 0, started with the agent or after: true
	// turn 1: tier 0, started with the agent or after: true
	// spans add up to the totals: true
}
