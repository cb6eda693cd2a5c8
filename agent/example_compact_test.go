package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// ExampleConfig_contextWindow runs an agent through eight tool turns of
// 2 KB results with a 2,048-token context window: older results are
// shortened as the conversation grows, every call keeping its result.
func ExampleConfig_contextWindow() {
	model, err := sim.New(sim.Config{ToolTurns: 8, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	read := tool.Func(tool.Spec{Name: "read", Parameters: json.RawMessage(`{"type":"object","properties":{"page":{"type":"integer"}}}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			return strings.Repeat("page text ", 200), nil
		})
	pool, err := tool.NewPool([]tool.Tool{read}, tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := agent.New(agent.Config{Model: model, Tools: pool, MaxTurns: 10, MaxTokens: 128, ContextWindow: 2048})
	if err != nil {
		fmt.Println(err)
		return
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Read the book."}}}
	if err := r.Run(context.Background(), st); err != nil {
		fmt.Println(err)
		return
	}
	shortened := 0
	for _, m := range st.Messages {
		if m.Role == llm.RoleTool && strings.Contains(m.Content, "[compacted: ") {
			shortened++
		}
	}
	fmt.Println("tool calls:", st.ToolCalls, "· compactions:", st.Compactions > 0, "· results shortened:", shortened > 0)
	// Output:
	// tool calls: 8 · compactions: true · results shortened: true
}

// ExampleContextError shows the failure of a task that alone exceeds the
// context window: no call is sent.
func ExampleContextError() {
	model, err := sim.New(sim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := agent.New(agent.Config{Model: model, MaxTokens: 100, ContextWindow: 1000})
	if err != nil {
		fmt.Println(err)
		return
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: strings.Repeat("Summarise this. ", 400)}}}
	err = r.Run(context.Background(), st)
	var ce *agent.ContextError
	fmt.Println(errors.As(err, &ce), errors.Is(err, llm.ErrContextLength), st.ModelCalls)
	fmt.Println(err)
	// Output:
	// true true 0
	// turn 0: generate: prompt of ~1608 tokens (task message ~1608, latest turn ~0, shared prefix and tools ~0) plus 100 for the answer exceeds the context window of 1000 tokens, after compacting every older turn
}
