package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
)

// recorder is an Observer that logs every event, and checks that what
// happens inside a turn or a call gets the context returned for it.
type recorder struct {
	mu     sync.Mutex
	events []string
}

type spanKey struct{}

func (r *recorder) log(ctx context.Context, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parent, _ := ctx.Value(spanKey{}).(string)
	r.events = append(r.events, parent+">"+fmt.Sprintf(format, args...))
}

func (r *recorder) Turn(ctx context.Context, turn int) (context.Context, func(*llm.Response, error)) {
	r.log(ctx, "turn %d", turn)
	ctx = context.WithValue(ctx, spanKey{}, fmt.Sprint("turn", turn))
	return ctx, func(resp *llm.Response, err error) { r.log(ctx, "turn end %v", err) }
}

func (r *recorder) ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(*llm.Response, error)) {
	r.log(ctx, "call %d msgs=%d", turn, len(req.Messages))
	return ctx, func(resp *llm.Response, err error) {
		if err != nil {
			r.log(ctx, "call end %v", err)
			return
		}
		r.log(ctx, "call end tools=%d", len(resp.Message.ToolCalls))
	}
}

func (r *recorder) Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(string, error)) {
	r.log(ctx, "tool %d %s %s", turn, call.Name, call.Arguments)
	return ctx, func(result string, err error) { r.log(ctx, "tool end %q %v", result, err) }
}

func (r *recorder) Retry(ctx context.Context, turn int, feedback string) {
	r.log(ctx, "retry %d %t", turn, feedback != "")
}

func TestObserverSeesEveryStep(t *testing.T) {
	transient := &llm.APIError{StatusCode: 503, Err: llm.ErrServer}
	m := &scripted{answers: []any{
		calls(llm.ToolCall{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"x":1}`)}),
		transient, // retried within turn 1
		text(`{"n":"not a number"}`),
		text(`{"n":3}`),
	}}
	r := newRunner(t, agent.Config{Model: m, Tools: newPool(t, nil), Schema: mustSchema(t)})
	rec := &recorder{}
	st := start("go")
	if err := r.Run(agent.WithObserver(t.Context(), rec), st); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []string{
		">turn 0", "turn0>call 0 msgs=2", "turn0>call end tools=1", "turn0>turn end <nil>",
		">tool 0 echo {\"x\":1}", `>tool end "echo {\"x\":1}" <nil>`,
		">turn 1", "turn1>call 1 msgs=4", "turn1>call end " + transient.Error(), "turn1>call 1 msgs=4", "turn1>call end tools=0", "turn1>turn end <nil>",
		">retry 1 true",
		">turn 2", "turn2>call 2 msgs=6", "turn2>call end tools=0", "turn2>turn end <nil>",
	}
	if !slices.Equal(rec.events, want) {
		t.Errorf("events:\n%q\nwant:\n%q", rec.events, want)
	}
}

func TestObserverSeesFailedTurn(t *testing.T) {
	m := &scripted{answers: []any{errors.New("boom")}}
	r := newRunner(t, agent.Config{Model: m})
	rec := &recorder{}
	if err := r.Run(agent.WithObserver(t.Context(), rec), start("go")); err == nil {
		t.Fatal("Run = nil, want the model's error")
	}
	if len(rec.events) != 4 || rec.events[3] != "turn0>turn end boom" {
		t.Errorf("events %q, want the turn to end with the error", rec.events)
	}
}
