package batchagent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// Rating is the typed form of the example jobs' output.
type Rating struct {
	Score int    `json:"score"`
	Label string `json:"label"`
}

const ratingSchema = `{
	"type": "object",
	"properties": {
		"score": {"type": "integer", "minimum": 1, "maximum": 5},
		"label": {"type": "string", "enum": ["bad", "ok", "great"]}
	},
	"required": ["score", "label"],
	"additionalProperties": false
}`

func ExampleRun() {
	model, err := sim.New(sim.Config{Seed: 42})
	if err != nil {
		panic(err)
	}
	job := batchagent.Job{
		Model:        model,
		System:       "You rate product reviews.",
		Task:         "Rate this review of {product}: {text}",
		OutputSchema: json.RawMessage(ratingSchema),
	}
	inputs := []batchagent.Input{
		{"product": "kettle", "text": "Boils fast, switch broke in a week."},
		{"product": "lamp", "text": "Lovely light."},
		{"product": "chair"}, // no "text": fails this input only
	}
	results, err := batchagent.Run(context.Background(), job, batchagent.Slice(inputs))
	if err != nil {
		panic(err) // only a bad job gets here
	}
	for _, r := range results {
		if r.Err != nil {
			fmt.Printf("%d: %s: %v\n", r.Index, batchagent.KindOf(r.Err), r.Err.(*batchagent.AgentError).Err)
			continue
		}
		rating, err := batchagent.Decode[Rating](r)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d: valid=%t turns=%d\n", r.Index, rating.Score >= 1 && rating.Score <= 5, r.Turns)
	}
	// Output:
	// 0: valid=true turns=1
	// 1: valid=true turns=1
	// 2: template: template: input has no field "text"
}

func ExampleStream() {
	// Every agent calls the tool once, then answers. Identical calls are
	// executed once and shared.
	lookup := tool.Func(tool.Spec{
		Name:        "lookup",
		Description: "Look up a product's category.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"product":{"type":"string"}},"required":["product"]}`),
		Cacheable:   true,
	}, func(ctx context.Context, args json.RawMessage) (string, error) {
		return `{"category":"home"}`, nil
	})
	model, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		panic(err)
	}
	engine, err := batchagent.New(batchagent.Job{
		Model:        model,
		Task:         "Look up product: {product} and rate it.",
		Tools:        []tool.Tool{lookup},
		OutputSchema: json.RawMessage(ratingSchema),
		MaxInflight:  4,
	})
	if err != nil {
		panic(err)
	}
	inputs := []batchagent.Input{{"product": "kettle"}, {"product": "kettle"}, {"product": "kettle"}}
	ok := 0
	for r := range engine.Stream(context.Background(), batchagent.Slice(inputs)) {
		if r.Err == nil {
			ok++
		}
	}
	st := engine.Stats()
	fmt.Printf("ok %d of %d, model calls %d, tool calls requested %d, executed %d\n",
		ok, len(inputs), st.ModelCalls, st.ToolRequested, st.ToolExecuted)
	// Output:
	// ok 3 of 3, model calls 6, tool calls requested 3, executed 1
}

// Review is a typed output: its JSON Schema is derived from the type.
type Review struct {
	Score   int      `json:"score" jsonschema:"overall score"`
	Verdict string   `json:"verdict" jsonschema:"one word"`
	Issues  []string `json:"issues"`
}

func ExampleRunTyped() {
	model, err := sim.New(sim.Config{Seed: 7})
	if err != nil {
		panic(err)
	}
	job := batchagent.Job{
		Model: model,
		Task:  "Review the pull request titled {title}.",
		// A semantic check beyond the schema: sent back to the model when it fails.
		Check: func(out json.RawMessage) error {
			var r Review
			if err := json.Unmarshal(out, &r); err != nil {
				return err
			}
			if r.Verdict == "" {
				return fmt.Errorf("verdict must not be empty")
			}
			return nil
		},
	}
	inputs := []batchagent.Input{{"title": "Fix the cache"}, {"title": "Add retries"}}
	results, err := batchagent.RunTyped[Review](context.Background(), job, batchagent.Slice(inputs))
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Printf("%d: ok=%t verdict set=%t\n", r.Index, r.Err == nil, r.Value.Verdict != "")
	}
	// Output:
	// 0: ok=true verdict set=true
	// 1: ok=true verdict set=true
}
