package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	// A Spec is compiled once and may be run any number of times.
	spec, err := batchagent.NewSpec(batchagent.Def{
		Model:        model,
		System:       "You rate product reviews.",
		Task:         "Rate this review of {product}: {text}",
		OutputSchema: json.RawMessage(ratingSchema),
	})
	if err != nil {
		panic(err) // a bad job: no model, a bad template or schema
	}
	inputs := []batchagent.Input{
		{"product": "kettle", "text": "Boils fast, switch broke in a week."},
		{"product": "lamp", "text": "Lovely light."},
		{"product": "chair"}, // no "text": fails this input only
	}
	results, err := batchagent.Run(context.Background(), spec, batchagent.Slice(inputs))
	if err != nil {
		panic(err) // only a nil spec gets here
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
	// The engine's settings are shared by every job run on it: here, at
	// most 4 model calls at once to each backend.
	engine, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: 4}})
	if err != nil {
		panic(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{
		Model:        model,
		Task:         "Look up product: {product} and rate it.",
		Tools:        []tool.Tool{lookup},
		OutputSchema: json.RawMessage(ratingSchema),
	})
	if err != nil {
		panic(err)
	}
	inputs := []batchagent.Input{{"product": "kettle"}, {"product": "kettle"}, {"product": "kettle"}}
	results, err := engine.Stream(context.Background(), spec, batchagent.Slice(inputs))
	if err != nil {
		panic(err)
	}
	ok := 0
	for r := range results {
		if r.Err == nil {
			ok++
		}
	}
	st := engine.Stats()
	fmt.Printf("ok %d of %d, model calls %d, tool calls requested %d, executed %d\n",
		ok, len(inputs), st.ModelCalls, st.ToolCalls, st.ToolExecuted)
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
	def := batchagent.Def{
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
	results, err := batchagent.RunTyped[Review](context.Background(), def, batchagent.Slice(inputs))
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

func ExampleEngine_Submit() {
	model, err := sim.New(sim.Config{Seed: 42})
	if err != nil {
		panic(err)
	}
	// One long-lived engine serves many jobs; an Interactive job's model
	// calls go before those of batch jobs on the same backend.
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		panic(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{
		Model:        model,
		Task:         "Rate this review of {product}: {text}",
		OutputSchema: json.RawMessage(ratingSchema),
		Priority:     batchagent.Interactive,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// Submit returns at once with a Handle; the agent runs meanwhile.
	h := engine.Submit(ctx, spec, batchagent.Input{"product": "lamp", "text": "Lovely light."})
	r, err := h.Wait(ctx) // an error only if ctx ends first
	if err != nil {
		panic(err)
	}
	rating, err := batchagent.Decode[Rating](r)
	if err != nil {
		panic(err)
	}
	fmt.Printf("valid=%t turns=%d\n", rating.Score >= 1 && rating.Score <= 5, r.Turns)
	// Once done, Try gives the same result without waiting.
	again, done := h.Try()
	fmt.Printf("done=%t same=%t\n", done, string(again.Output) == string(r.Output))
	// A bad input fails its own Handle only.
	bad := engine.Submit(ctx, spec, batchagent.Input{"product": "chair"})
	<-bad.Done()
	r, _ = bad.Try()
	fmt.Printf("%s: %v\n", batchagent.KindOf(r.Err), r.Err.(*batchagent.AgentError).Err)
	if err := engine.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// valid=true turns=1
	// done=true same=true
	// template: template: input has no field "text"
}

func ExampleEngine_Shutdown() {
	model, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		panic(err)
	}
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		panic(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{Model: model, Task: "Summarise {doc}."})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var handles []*batchagent.Handle
	for _, doc := range []string{"a.txt", "b.txt", "c.txt"} {
		handles = append(handles, engine.Submit(ctx, spec, batchagent.Input{"doc": doc}))
	}
	// Shutdown stops admitting work, lets the turns in flight finish, and
	// cancels what is left when its context ends (say, a signal's grace
	// period). Every Handle then has its result: done, or canceled.
	grace, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := engine.Shutdown(grace); err != nil {
		fmt.Println("grace period over:", err)
	}
	ended := 0
	for _, h := range handles {
		if _, ok := h.Try(); ok {
			ended++
		}
	}
	fmt.Printf("handles ended: %d of %d\n", ended, len(handles))
	// Work given to a shut-down engine ends at once, canceled.
	r, _ := engine.Submit(ctx, spec, batchagent.Input{"doc": "d.txt"}).Try()
	fmt.Printf("after shutdown: %s, shut down %t\n", batchagent.KindOf(r.Err), errors.Is(r.Err, batchagent.ErrShutdown))
	// Output:
	// handles ended: 3 of 3
	// after shutdown: canceled, shut down true
}

// ExamplePack packs tiny tasks: up to 25 agents share one model call,
// and each gets its own result as its answer streams in.
func ExamplePack() {
	model, err := sim.New(sim.Config{Seed: 7, ToolTurns: -1})
	if err != nil {
		panic(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{
		Model:        model,
		System:       "You rate product reviews.",
		Task:         "Rate review {n}.",
		OutputSchema: json.RawMessage(ratingSchema),
		Pack:         batchagent.Pack{MaxAgents: 25},
	})
	if err != nil {
		panic(err)
	}
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		panic(err)
	}
	inputs := make([]batchagent.Input, 100)
	for i := range inputs {
		inputs[i] = batchagent.Input{"n": i}
	}
	results, err := engine.Run(context.Background(), spec, batchagent.Slice(inputs))
	if err != nil {
		panic(err)
	}
	ok := 0
	for _, r := range results {
		if r.Err == nil && r.Packed > 0 {
			ok++
		}
	}
	// Packs of 25 take 4 calls; a pack sent before all its agents
	// arrived (after a 2 ms wait, which a loaded machine can overrun)
	// takes more, still far fewer than the 100 calls of agents alone.
	st := engine.Stats()
	fmt.Printf("%d packed results, few model calls: %v\n", ok, st.ModelCalls <= 25)
	// Output: 100 packed results, few model calls: true
}

// ExamplePolicy chooses how the agents' model calls wait for the
// backend's slots: here in arrival order, with cache-aware continuation
// (an agent back from tool calls that took at most 2s goes first).
func ExamplePolicy() {
	model, err := sim.New(sim.Config{Seed: 7, ToolTurns: -1})
	if err != nil {
		panic(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{Model: model, Task: "Summarise ticket {n}."})
	if err != nil {
		panic(err)
	}
	engine, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{
		MaxInflight:  4,
		Policy:       batchagent.PolicyFIFO,
		Continuation: 2 * time.Second,
	}})
	if err != nil {
		panic(err)
	}
	inputs := make([]batchagent.Input, 10)
	for i := range inputs {
		inputs[i] = batchagent.Input{"n": i}
	}
	results, err := engine.Run(context.Background(), spec, batchagent.Slice(inputs))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(results), "results; default policy:", batchagent.DefaultPolicy)
	// Output: 10 results; default policy: turns
}
