package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/llm"
)

// newProvider returns a tracer provider exporting synchronously to an
// in-memory exporter.
func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// tree renders spans as an indented tree, children in start order.
func tree(spans tracetest.SpanStubs) string {
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		var children tracetest.SpanStubs
		for _, s := range spans {
			if s.Parent.SpanID().String() == parent {
				children = append(children, s)
			}
		}
		slices.SortFunc(children, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for _, s := range children {
			fmt.Fprintf(&b, "%s%s (%s)\n", strings.Repeat("  ", depth), s.Name, attrs(s)[telemetry.AttrSpanKind])
			walk(s.SpanContext.SpanID().String(), depth+1)
		}
	}
	walk("0000000000000000", 0)
	return b.String()
}

// runTraced runs one agent of newSpec watched by a tracer, and returns its
// result and the spans recorded.
func runTraced(t *testing.T, content bool) (batchagent.Result, tracetest.SpanStubs, string) {
	t.Helper()
	tp, exp := newProvider(t)
	tracer := telemetry.NewAgentTracer(tp)
	tracer.Content = content
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var args atomic.Value
	spec := newSpec(t, &args)
	// The tracer is an agent.Scope: the engine opens the agent's span.
	ctx := agent.WithObserver(t.Context(), tracer)
	r, err := engine.Submit(ctx, spec, batchagent.Input{"product": "kettle"}).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.Err != nil {
		t.Fatalf("agent: %v", r.Err)
	}
	toolArgs, _ := args.Load().(string)
	return r, exp.GetSpans(), toolArgs
}

func TestAgentTracerSpans(t *testing.T) {
	r, spans, toolArgs := runTraced(t, true)
	want := `agent review (AGENT)
  turn 0 (CHAIN)
    model call (LLM)
  tool lookup (TOOL)
  turn 1 (CHAIN)
    model call (LLM)
`
	if diff := cmp.Diff(want, tree(spans)); diff != "" {
		t.Fatalf("span tree (-want +got):\n%s", diff)
	}
	byName := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		slices.SortFunc(out, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		return out
	}
	u := r.Usage
	wantAgent := map[string]any{
		telemetry.AttrSpanKind: "AGENT", telemetry.AttrJob: "review", telemetry.AttrIndex: int64(0),
		telemetry.AttrTokensPrompt: u.PromptTokens, telemetry.AttrTokensCompletion: u.CompletionTokens,
		telemetry.AttrTokensTotal: u.PromptTokens + u.CompletionTokens,
		telemetry.AttrInput:       `{"product":"kettle"}`, telemetry.AttrInputMIME: "application/json",
		telemetry.AttrOutput: string(r.Output), telemetry.AttrOutputMIME: "application/json",
	}
	if diff := cmp.Diff(wantAgent, attrs(byName("agent review")[0])); diff != "" {
		t.Errorf("agent span attributes (-want +got):\n%s", diff)
	}
	if toolArgs == "" {
		t.Fatal("the tool was not called")
	}
	wantTool := map[string]any{
		telemetry.AttrSpanKind: "TOOL", telemetry.AttrToolName: "lookup", telemetry.AttrTurn: int64(0),
		telemetry.AttrInput: toolArgs, telemetry.AttrInputMIME: "application/json", telemetry.AttrOutput: lookupResult,
	}
	if diff := cmp.Diff(wantTool, attrs(byName("tool lookup")[0])); diff != "" {
		t.Errorf("tool span attributes (-want +got):\n%s", diff)
	}
	turns := byName("turn 1")
	if got := attrs(turns[0]); got[telemetry.AttrTurn] != int64(1) || got[telemetry.AttrOutput] != string(r.Output) {
		t.Errorf("turn 1 attributes %v, want turn 1 and output.value %s (the answer)", got, r.Output)
	}
	// Each model call: LLM, the model's name, its tokens; summed, the
	// agent's usage.
	var sum llm.Usage
	for i, s := range byName("model call") {
		a := attrs(s)
		p, c := a[telemetry.AttrTokensPrompt].(int64), a[telemetry.AttrTokensCompletion].(int64)
		if a[telemetry.AttrSpanKind] != "LLM" || a[telemetry.AttrModelName] != "sim-1" || a[telemetry.AttrTurn] != int64(i) ||
			p == 0 || a[telemetry.AttrTokensTotal] != p+c {
			t.Errorf("model call %d attributes %v, want kind LLM, model sim-1, turn %d, prompt > 0, total = prompt + completion", i, a, i)
		}
		if in, _ := a[telemetry.AttrInput].(string); !strings.Contains(in, "Look up product: kettle and rate it.") {
			t.Errorf("model call %d input.value %q, want the messages with the task", i, in)
		}
		sum = sum.Add(llm.Usage{PromptTokens: p, CompletionTokens: c})
	}
	if sum.PromptTokens != u.PromptTokens || sum.CompletionTokens != u.CompletionTokens {
		t.Errorf("model calls' tokens sum to %+v, want the agent's usage %+v", sum, u)
	}
	for _, s := range spans {
		if s.Status.Code != codes.Unset || s.EndTime.IsZero() {
			t.Errorf("span %q: status %v, ended %v; want unset status, ended", s.Name, s.Status, !s.EndTime.IsZero())
		}
	}
}

func TestAgentTracerWithoutContent(t *testing.T) {
	_, spans, _ := runTraced(t, false)
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6", len(spans))
	}
	for _, s := range spans {
		a := attrs(s)
		for _, k := range []string{telemetry.AttrInput, telemetry.AttrOutput} {
			if v, ok := a[k]; ok {
				t.Errorf("span %q has %s = %q with Content off", s.Name, k, v)
			}
		}
		if kind := a[telemetry.AttrSpanKind]; (kind == "LLM" || kind == "AGENT") && a[telemetry.AttrTokensTotal] == nil {
			t.Errorf("span %q has no token counts", s.Name)
		}
	}
}

func TestAgentTracerCapsAndErrors(t *testing.T) {
	tp, exp := newProvider(t)
	tracer := telemetry.NewAgentTracer(tp)
	tracer.Content, tracer.MaxContent = true, 4
	// `"é` is 3 bytes; the fourth byte is inside the second é: cut before it.
	_, end := tracer.Tool(t.Context(), 2, llm.ToolCall{Name: "fetch", Arguments: json.RawMessage(`"éé"`)})
	end("", errors.New("fetch: 404"))
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	a := attrs(spans[0])
	if a[telemetry.AttrInput] != `"é` {
		t.Errorf("input.value = %q, want %q (capped at 4 bytes on a UTF-8 boundary)", a[telemetry.AttrInput], `"é`)
	}
	if _, ok := a[telemetry.AttrOutput]; ok {
		t.Errorf("a failed tool call has output.value %q", a[telemetry.AttrOutput])
	}
	if spans[0].Status.Code != codes.Error || spans[0].Status.Description != "fetch: 404" {
		t.Errorf("status %+v, want Error \"fetch: 404\"", spans[0].Status)
	}

	// A failed agent: its span says the kind.
	exp.Reset()
	_, endAgent := tracer.Agent(t.Context(), "review", 3)
	endAgent(batchagent.Result{Index: 3, Err: &batchagent.AgentError{JobID: "review", Agent: 3, Kind: batchagent.KindTimeout, Err: context.DeadlineExceeded}})
	spans = exp.GetSpans()
	if len(spans) != 1 || attrs(spans[0])[telemetry.AttrKind] != "timeout" || spans[0].Status.Code != codes.Error {
		t.Errorf("failed agent's spans %+v, want one with batchagent.kind timeout and status Error", spans)
	}
}

// turnCounter is an Observer counting turns and noting the name of the
// span its context holds.
type turnCounter struct {
	mu      sync.Mutex // protects parents, retries
	parents []string   // the span of each Turn's and Tool's context
	retries int
}

func (c *turnCounter) note(ctx context.Context) {
	name := ""
	if s, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan); ok {
		name = s.Name()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parents = append(c.parents, name)
}

func (c *turnCounter) Turn(ctx context.Context, turn int) (context.Context, func(*llm.Response, error)) {
	c.note(ctx)
	return ctx, func(*llm.Response, error) {}
}

func (c *turnCounter) ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(*llm.Response, error)) {
	return ctx, func(*llm.Response, error) {}
}

func (c *turnCounter) Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(string, error)) {
	c.note(ctx)
	return ctx, func(string, error) {}
}

func (c *turnCounter) Retry(ctx context.Context, turn int, feedback string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retries++
}

// TestJoinAndRetries runs an agent whose answers are always invalid under
// Join(tracer, counter): the tracer records each correction as an event on
// the agent's span and fails it as a validation failure; the counter sees
// every turn, inside the tracer's span.
func TestJoinAndRetries(t *testing.T) {
	tp, exp := newProvider(t)
	tracer := telemetry.NewAgentTracer(tp)
	counter := &turnCounter{}
	model, err := sim.New(sim.Config{Seed: 1, ToolTurns: -1, InvalidRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "strict", Model: model, Task: "rate {x}",
		OutputSchema: json.RawMessage(ratingSchema), MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := tracer.Agent(t.Context(), "strict", 0)
	ctx = agent.WithObserver(ctx, telemetry.Join(tracer, counter))
	r, err := engine.Submit(ctx, spec, batchagent.Input{"x": "y"}).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	end(r)
	if batchagent.KindOf(r.Err) != batchagent.KindValidation {
		t.Fatalf("result error %v, want a validation failure", r.Err)
	}
	want := "agent strict (AGENT)\n" + strings.Repeat("  turn N (CHAIN)\n    model call (LLM)\n", 3)
	got := regexp.MustCompile(`turn \d`).ReplaceAllString(tree(exp.GetSpans()), "turn N")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}
	var agentSpan tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "agent strict" {
			agentSpan = s
		}
	}
	var retries []int64
	for _, e := range agentSpan.Events {
		if e.Name == "validation retry" {
			for _, a := range e.Attributes {
				if a.Key == telemetry.AttrTurn {
					retries = append(retries, a.Value.AsInt64())
				}
			}
		}
	}
	if !slices.Equal(retries, []int64{0, 1}) || counter.retries != 2 {
		t.Errorf("retry events at turns %v, counter saw %d; want turns [0 1] and 2", retries, counter.retries)
	}
	if a := attrs(agentSpan); a[telemetry.AttrKind] != "validation" || agentSpan.Status.Code != codes.Error {
		t.Errorf("agent span kind %v, status %v; want validation, Error", a[telemetry.AttrKind], agentSpan.Status)
	}
	if want := []string{"turn 0", "turn 1", "turn 2"}; !slices.Equal(counter.parents, want) {
		t.Errorf("the joined observer's turn contexts hold spans %q, want %q (the tracer's, which comes first)", counter.parents, want)
	}
}
