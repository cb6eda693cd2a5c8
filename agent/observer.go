package agent

import (
	"context"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// Observer watches one agent's progress: a gateway streams it to the
// client, tracing turns it into spans. Set it per agent with
// [WithObserver] on the context the agent runs under.
//
// Methods that begin something return the context for what happens inside
// it (a tracer's span context) and a function the agent calls once when it
// ends. Turn, ModelCall and Retry are called from the agent's goroutine;
// Tool, from one goroutine per tool call of a turn, concurrently.
type Observer interface {
	// Turn is called as model turn turn (from 0) begins, before its model
	// call is admitted; end gets the turn's answer, or its error after
	// every retry.
	Turn(ctx context.Context, turn int) (context.Context, func(resp *llm.Response, err error))
	// ModelCall is called as one attempt of the turn's model call is sent,
	// after admission; end gets its answer or error.
	ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(resp *llm.Response, err error))
	// Tool is called as a tool call of turn begins; end gets the result as
	// sent to the model, or the tool's error. A call whose arguments are
	// complete while the answer still streams begins then, before the
	// turn's model call ends; if that call then fails (and is retried),
	// or the answer is cut off at the token cap, the tool's context is
	// cancelled, end gets its error, and the result is not sent.
	Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(result string, err error))
	// Retry is called when the answer of turn goes back to the model for
	// correction, with the feedback sent.
	Retry(ctx context.Context, turn int, feedback string)
}

// Scope is an Observer that also sees each agent begin and end: an engine
// running agents under a context whose Observer is a Scope calls Agent as
// each agent starts (index is its input's) and end once with its result;
// the agent then runs under the context Agent returns.
type Scope interface {
	Observer
	Agent(ctx context.Context, jobID string, index int) (context.Context, func(job.Result))
}

type observerKey struct{}

// ObserverFrom returns the Observer set on ctx with WithObserver, or nil.
func ObserverFrom(ctx context.Context) Observer { return observerOf(ctx) }

// WithObserver returns ctx with o watching the agent run under it.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// observerOf returns the Observer of ctx, or nil.
func observerOf(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}
