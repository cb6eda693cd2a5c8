package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/tool"
)

// TestAgentDisconnect: a client that leaves while the agent waits on a
// tool stops the agent: the tool's context is cancelled at once.
func TestAgentDisconnect(t *testing.T) {
	started := make(chan struct{})
	stopped := make(chan time.Time, 1) // when the tool saw the cancellation
	wait := tool.Func(tool.Spec{Name: "wait", Description: "Wait."}, func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(started)
		<-ctx.Done()
		stopped <- time.Now()
		return "", ctx.Err()
	})
	spec, err := batchagent.NewSpec(batchagent.Def{Model: newSim(t, sim.Config{Seed: 1, ToolTurns: 1}), Task: "{input}",
		Tools: []tool.Tool{wait}, Priority: batchagent.Interactive})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Agents: map[string]*batchagent.Spec{"waiter": spec}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := g.client("").Chat.Completions.NewStreaming(ctx, userParams("agent:waiter", "go"))
	sawCall := false
	for !sawCall && stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			f, ok := ch.Choices[0].Delta.JSON.ExtraFields["batchagent_event"]
			var e server.Event
			sawCall = ok && json.Unmarshal([]byte(f.Raw()), &e) == nil && e.Type == "tool_call" && e.Tool == "wait"
		}
	}
	if !sawCall {
		t.Fatalf("no tool_call event before the disconnect: %v", stream.Err())
	}
	<-started
	left := time.Now()
	cancel()
	stream.Close()
	select {
	case at := <-stopped:
		if d := at.Sub(left); d > 100*time.Millisecond {
			t.Errorf("the tool was cancelled %v after the disconnect, want within 100ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's tool was not cancelled after the client left")
	}
}

// TestAgentFailure: an agent whose answers stay invalid fails with 500
// and a code naming the kind of failure.
func TestAgentFailure(t *testing.T) {
	spec, err := batchagent.NewSpec(batchagent.Def{Model: newSim(t, sim.Config{Seed: 1, ToolTurns: -1, InvalidRate: 1}), Task: "{input}",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Agents: map[string]*batchagent.Spec{"bad": spec}})
	_, err = g.client("").Chat.Completions.New(t.Context(), userParams("agent:bad", "go"))
	wantStatus(t, "invalid agent", err, http.StatusInternalServerError, "agent_validation")

	// Streamed, the failure comes after the progress events, as an error
	// event: the client's stream ends with an error.
	stream := g.client("").Chat.Completions.NewStreaming(t.Context(), userParams("agent:bad", "go"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if stream.Err() == nil {
		t.Errorf("streamed invalid agent: no error, content %q", acc.Choices[0].Message.Content)
	}
}
