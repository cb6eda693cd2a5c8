package router_test

import (
	"context"
	"fmt"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/router"
)

// Two deployments of one model: the router is an llm.Model, so it goes
// wherever one does (a batchagent.Backend, a job's model, the gateway).
func ExampleNew() {
	east, _ := sim.New(sim.Config{Seed: 1})
	west, _ := sim.New(sim.Config{Seed: 2})
	r, err := router.New(router.Config{Deployments: []router.Deployment{
		{Name: "east", Model: east, MaxInflight: 32, Weight: 2},
		{Name: "west", Model: west, MaxInflight: 16},
	}})
	if err != nil {
		panic(err)
	}
	var m llm.Model = r
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		panic(err)
	}
	fmt.Println("max in flight:", r.MaxInflight())
	for _, s := range r.Stats() {
		fmt.Printf("%s: limit %d, breaker %s\n", s.Name, s.Limit, s.State)
	}
	// Output:
	// max in flight: 48
	// east: limit 32, breaker closed
	// west: limit 16, breaker closed
}
