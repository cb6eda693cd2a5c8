package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// BenchmarkToolTurns runs an agent of two tool turns and an answer on the
// streaming simulator with no latency: the loop's own cost per agent,
// tool calls started as their stream says they are complete included.
func BenchmarkToolTurns(b *testing.B) {
	m, err := sim.New(sim.Config{ToolTurns: 2, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	lookup := tool.Func(tool.Spec{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (string, error) { return "found", nil })
	pool, err := tool.NewPool([]tool.Tool{lookup}, tool.PoolConfig{})
	if err != nil {
		b.Fatal(err)
	}
	r, err := agent.New(agent.Config{Model: m, Tools: pool})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "item 1"}}}
		if err := r.Run(b.Context(), st); err != nil {
			b.Fatal(err)
		}
		if st.ToolCalls == 0 {
			b.Fatal("no tool calls")
		}
	}
}
