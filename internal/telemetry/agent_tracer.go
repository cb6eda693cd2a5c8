package telemetry

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
)

// DefaultMaxContent is the default cap, in bytes, of the text recorded in
// a span's input.value and output.value.
const DefaultMaxContent = 4096

// TracerName is the instrumentation scope name of the spans of an
// [AgentTracer].
const TracerName = "github.com/batchagent/batchagent/internal/telemetry"

// OpenInference attribute keys (https://github.com/Arize-ai/openinference,
// semantic conventions), and the values of openinference.span.kind used.
const (
	AttrSpanKind         = "openinference.span.kind"
	AttrModelName        = "llm.model_name"
	AttrTokensPrompt     = "llm.token_count.prompt"
	AttrTokensCompletion = "llm.token_count.completion"
	AttrTokensTotal      = "llm.token_count.total"
	AttrTokensCacheRead  = "llm.token_count.prompt_details.cache_read"
	AttrInput            = "input.value"
	AttrInputMIME        = "input.mime_type"
	AttrOutput           = "output.value"
	AttrOutputMIME       = "output.mime_type"
	AttrToolName         = "tool.name"

	KindAgent = "AGENT"
	KindChain = "CHAIN"
	KindLLM   = "LLM"
	KindTool  = "TOOL"
)

// Attributes of ours, beside OpenInference's.
const (
	AttrJob   = "batchagent.job"   // the job (spec) ID
	AttrIndex = "batchagent.agent" // the agent's index within its job
	AttrTurn  = "batchagent.turn"  // the turn, from 0
	AttrKind  = "batchagent.kind"  // a failed agent's kind
)

// AgentTracer is an [agent.Observer] that records an agent's work as
// OpenTelemetry spans with OpenInference attributes:
//
//	agent (AGENT, from [AgentTracer.Agent])
//	├── turn N (CHAIN): one model turn, its retries included
//	│   └── model call (LLM): one attempt, with llm.model_name and token counts
//	└── tool NAME (TOOL): one tool call of turn N, with tool.name
//
// Tool calls are children of the agent, as the agent runs them after its
// turn's answer (the turn span ends with the answer); their batchagent.turn
// attribute names the turn. A validation retry is an event on the agent's
// span. Without [AgentTracer.Agent], the spans nest under whatever span
// the agent's context holds.
//
// Prompt and answer text (input.value, output.value) is recorded only
// when Content is set, each value capped at MaxContent bytes.
//
// The zero value is not usable: create one with [NewAgentTracer]. Its
// fields must not change once it is in use; it is then safe for
// concurrent use.
type AgentTracer struct {
	tracer trace.Tracer
	// Content records prompts, answers, tool arguments and results in
	// input.value and output.value. Defaults to false: token counts,
	// names and errors only.
	Content bool
	// MaxContent caps each recorded value, in bytes (cut on a UTF-8
	// boundary). Defaults to DefaultMaxContent.
	MaxContent int
}

var _ agent.Observer = (*AgentTracer)(nil)

// NewAgentTracer returns an AgentTracer whose spans come from tp; a nil
// tp records nothing.
func NewAgentTracer(tp trace.TracerProvider) *AgentTracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &AgentTracer{tracer: tp.Tracer(TracerName)}
}

// Agent starts the span of one agent, agent index of job, and returns the
// context to run it under (t watching it, as by [agent.WithObserver]) and
// the function to call once with its result. To watch the agent with
// another Observer as well, set [agent.WithObserver] on the returned
// context with [Join] of both.
func (t *AgentTracer) Agent(ctx context.Context, job string, index int) (context.Context, func(batchagent.Result)) {
	ctx, span := t.tracer.Start(ctx, "agent "+job, trace.WithAttributes(
		attribute.String(AttrSpanKind, KindAgent),
		attribute.String(AttrJob, job),
		attribute.Int(AttrIndex, index),
	))
	return agent.WithObserver(ctx, t), func(r batchagent.Result) {
		span.SetAttributes(tokenCounts(r.Usage)...)
		if t.Content {
			if in, err := json.Marshal(r.Input); err == nil && r.Input != nil {
				span.SetAttributes(attribute.String(AttrInput, t.cap(string(in))), attribute.String(AttrInputMIME, "application/json"))
			}
			if r.Output != nil {
				span.SetAttributes(attribute.String(AttrOutput, t.cap(string(r.Output))), attribute.String(AttrOutputMIME, "application/json"))
			}
		}
		if r.Err != nil {
			span.SetAttributes(attribute.String(AttrKind, string(batchagent.KindOf(r.Err))))
			span.RecordError(r.Err)
			span.SetStatus(codes.Error, string(batchagent.KindOf(r.Err)))
		}
		span.End()
	}
}

// Request begins the span of one request to the gateway for model (a
// backend's model name, or "agent:NAME"): a CHAIN span whose input is the
// last user message and whose output is the answer, when Content is set,
// with the usage summed over the request. It makes t a server.Tracer.
func (t *AgentTracer) Request(ctx context.Context, model, input string) (context.Context, func(output string, usage llm.Usage, err error)) {
	ctx, span := t.tracer.Start(ctx, "chat "+model, trace.WithAttributes(
		attribute.String(AttrSpanKind, KindChain),
		attribute.String(AttrModelName, model),
	))
	if t.Content {
		span.SetAttributes(attribute.String(AttrInput, t.cap(input)))
	}
	return ctx, func(output string, usage llm.Usage, err error) {
		span.SetAttributes(tokenCounts(usage)...)
		if t.Content {
			span.SetAttributes(attribute.String(AttrOutput, t.cap(output)))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Turn implements [agent.Observer]: a CHAIN span for model turn turn.
func (t *AgentTracer) Turn(ctx context.Context, turn int) (context.Context, func(*llm.Response, error)) {
	ctx, span := t.tracer.Start(ctx, "turn "+strconv.Itoa(turn), trace.WithAttributes(
		attribute.String(AttrSpanKind, KindChain),
		attribute.Int(AttrTurn, turn),
	))
	return ctx, func(resp *llm.Response, err error) {
		if resp != nil {
			t.setOutput(span, resp)
		}
		endSpan(span, err)
	}
}

// ModelCall implements [agent.Observer]: an LLM span for one attempt of
// the turn's model call.
func (t *AgentTracer) ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(*llm.Response, error)) {
	attrs := []attribute.KeyValue{
		attribute.String(AttrSpanKind, KindLLM),
		attribute.Int(AttrTurn, turn),
	}
	if req != nil && req.Model != "" {
		attrs = append(attrs, attribute.String(AttrModelName, req.Model))
	}
	ctx, span := t.tracer.Start(ctx, "model call", trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindClient))
	if t.Content && req != nil {
		if in, err := json.Marshal(req.Messages); err == nil {
			span.SetAttributes(attribute.String(AttrInput, t.cap(string(in))), attribute.String(AttrInputMIME, "application/json"))
		}
	}
	return ctx, func(resp *llm.Response, err error) {
		if resp != nil {
			span.SetAttributes(tokenCounts(resp.Usage)...)
			t.setOutput(span, resp)
		}
		endSpan(span, err)
	}
}

// Tool implements [agent.Observer]: a TOOL span for one tool call.
func (t *AgentTracer) Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(string, error)) {
	ctx, span := t.tracer.Start(ctx, "tool "+call.Name, trace.WithAttributes(
		attribute.String(AttrSpanKind, KindTool),
		attribute.String(AttrToolName, call.Name),
		attribute.Int(AttrTurn, turn),
	))
	if t.Content {
		span.SetAttributes(attribute.String(AttrInput, t.cap(string(call.Arguments))), attribute.String(AttrInputMIME, "application/json"))
	}
	return ctx, func(result string, err error) {
		if t.Content && err == nil {
			span.SetAttributes(attribute.String(AttrOutput, t.cap(result)))
		}
		endSpan(span, err)
	}
}

// Retry implements [agent.Observer]: a "validation retry" event on the
// span of ctx (the agent's), with the feedback when Content is set.
func (t *AgentTracer) Retry(ctx context.Context, turn int, feedback string) {
	attrs := []attribute.KeyValue{attribute.Int(AttrTurn, turn)}
	if t.Content {
		attrs = append(attrs, attribute.String("feedback", t.cap(feedback)))
	}
	trace.SpanFromContext(ctx).AddEvent("validation retry", trace.WithAttributes(attrs...))
}

// setOutput records resp's answer as output.value: its text, else its
// tool calls as JSON.
func (t *AgentTracer) setOutput(span trace.Span, resp *llm.Response) {
	if !t.Content {
		return
	}
	if resp.Message.Content != "" || len(resp.Message.ToolCalls) == 0 {
		span.SetAttributes(attribute.String(AttrOutput, t.cap(resp.Message.Content)))
		return
	}
	if out, err := json.Marshal(resp.Message.ToolCalls); err == nil {
		span.SetAttributes(attribute.String(AttrOutput, t.cap(string(out))), attribute.String(AttrOutputMIME, "application/json"))
	}
}

// cap cuts s to MaxContent bytes, on a UTF-8 boundary.
func (t *AgentTracer) cap(s string) string {
	n := t.MaxContent
	if n <= 0 {
		n = DefaultMaxContent
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tokenCounts returns the OpenInference token counts of u.
func tokenCounts(u llm.Usage) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.Int64(AttrTokensPrompt, u.PromptTokens),
		attribute.Int64(AttrTokensCompletion, u.CompletionTokens),
		attribute.Int64(AttrTokensTotal, u.Total()),
	}
	if u.CachedTokens > 0 {
		attrs = append(attrs, attribute.Int64(AttrTokensCacheRead, u.CachedTokens))
	}
	return attrs
}

// endSpan ends span, failed with err when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Join returns an Observer that passes every event to each of obs in
// order: a gateway's progress stream and a tracer watching one agent. The
// context each returns is given to the next, so the last one's context
// holds what all of them put in it (the tracer's span, say); the end
// functions are called in the reverse order.
func Join(obs ...agent.Observer) agent.Observer {
	return joined(slices.Clone(obs))
}

type joined []agent.Observer

func (j joined) Turn(ctx context.Context, turn int) (context.Context, func(*llm.Response, error)) {
	ends := make([]func(*llm.Response, error), len(j))
	for i, o := range j {
		ctx, ends[i] = o.Turn(ctx, turn)
	}
	return ctx, func(resp *llm.Response, err error) {
		for _, end := range slices.Backward(ends) {
			end(resp, err)
		}
	}
}

func (j joined) ModelCall(ctx context.Context, turn int, req *llm.Request) (context.Context, func(*llm.Response, error)) {
	ends := make([]func(*llm.Response, error), len(j))
	for i, o := range j {
		ctx, ends[i] = o.ModelCall(ctx, turn, req)
	}
	return ctx, func(resp *llm.Response, err error) {
		for _, end := range slices.Backward(ends) {
			end(resp, err)
		}
	}
}

func (j joined) Tool(ctx context.Context, turn int, call llm.ToolCall) (context.Context, func(string, error)) {
	ends := make([]func(string, error), len(j))
	for i, o := range j {
		ctx, ends[i] = o.Tool(ctx, turn, call)
	}
	return ctx, func(result string, err error) {
		for _, end := range slices.Backward(ends) {
			end(result, err)
		}
	}
}

func (j joined) Retry(ctx context.Context, turn int, feedback string) {
	for _, o := range j {
		o.Retry(ctx, turn, feedback)
	}
}
