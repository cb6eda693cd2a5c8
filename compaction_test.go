package batchagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// TestCompactionsInResult checks that a job's ContextWindow reaches its
// agents and that their compactions reach the result and its JSON line:
// twelve tool turns of 2 KB results do not fit a 4k window uncompacted.
func TestCompactionsInResult(t *testing.T) {
	m, err := sim.New(sim.Config{ToolTurns: 12, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	fetch := tool.Func(tool.Spec{Name: "fetch", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","maxLength":20}}}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			return strings.Repeat("page text ", 200), nil
		})
	spec := mustSpec(t, batchagent.Def{Model: m, Task: "Read about {topic}.", Tools: []tool.Tool{fetch},
		MaxTurns: 20, MaxTokens: 256, ContextWindow: 4096})
	results, err := batchagent.Run(t.Context(), spec, batchagent.Slice([]batchagent.Input{{"topic": "windows"}}))
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.Err != nil || r.ToolCalls != 12 {
		t.Fatalf("result: err %v, %d tool calls; want success after 12", r.Err, r.ToolCalls)
	}
	if r.Compactions == 0 {
		t.Errorf("Compactions = 0, want > 0: 24 KB of results in a 4k window")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"compactions":`)) {
		t.Errorf("result JSON %s has no compactions", b)
	}
}

// TestContextWindowBelowMaxTokens checks that a window that leaves no
// room for a prompt is refused when the job is built.
func TestContextWindowBelowMaxTokens(t *testing.T) {
	m, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = batchagent.NewSpec(batchagent.Def{Model: m, Task: "x", ContextWindow: 1000})
	if err == nil || !strings.Contains(err.Error(), "context window of 1000 tokens") {
		t.Errorf("NewSpec(ContextWindow 1000, default max tokens) = %v, want an error naming the window", err)
	}
}
