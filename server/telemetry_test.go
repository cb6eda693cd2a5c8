package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	backendopenai "github.com/batchagent/batchagent/backend/openai"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/server"
)

// TestGatewayMetricsAndSpans serves a passthrough and an agent-mode
// request through a gateway wired as `batchagent serve` wires it, then
// scrapes /metrics (parsed with the Prometheus text parser) and reads the
// spans from the SDK's in-memory exporter.
func TestGatewayMetricsAndSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	tracer := telemetry.NewAgentTracer(tp)
	tracer.Content = true

	m := newSim(t, sim.Config{Seed: 5})
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	metrics := telemetry.NewMetrics()
	if err := metrics.Watch(engine); err != nil {
		t.Fatal(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "echo", Model: m, ModelName: "sim", Task: "Say: {input}", Priority: batchagent.Interactive})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Engine:   engine,
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}},
		Agents:   map[string]*batchagent.Spec{"echo": spec},
		Recorder: metrics, Metrics: metrics.Exposition(), Instrument: metrics.Handler,
		Tracer: tracer, Observer: tracer,
	})
	c := g.client("")
	pass, err := c.Chat.Completions.New(t.Context(), userParams("sim", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	ag, err := c.Chat.Completions.New(t.Context(), userParams("agent:echo", "hi there"))
	if err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("no metric %s in /metrics", name)
		}
	next:
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s with labels %v", name, labels)
		return 0
	}
	if v := value("batchagent_http_requests_total", map[string]string{"route": "/v1/chat/completions", "code": "200"}); v != 2 {
		t.Errorf("chat completions counted %v, want 2", v)
	}
	if v := value("batchagent_tokens_total", map[string]string{"source": "call", "name": "sim", "type": "completion"}); v != float64(pass.Usage.CompletionTokens) {
		t.Errorf("passthrough completion tokens %v, want %d", v, pass.Usage.CompletionTokens)
	}
	if v := value("batchagent_ttft_seconds", map[string]string{"source": "call", "name": "sim"}); v != 1 {
		t.Errorf("passthrough TTFT samples %v, want 1", v)
	}
	if v := value("batchagent_agents_done_total", map[string]string{"result": "ok"}); v != 1 {
		t.Errorf("agents done ok %v, want 1: the agent-mode run", v)
	}

	// Spans: one per request, the agent's turn and model call under its
	// request's span, with OpenInference attributes.
	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	chatSim, ok1 := byName["chat sim"]
	chatAgent, ok2 := byName["chat agent:echo"]
	turn, ok3 := byName["turn 0"]
	agentSpan, ok4 := byName["agent echo"]
	if !ok1 || !ok2 || !ok3 || !ok4 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("spans %q, want chat sim, chat agent:echo, agent echo and turn 0", names)
	}
	// request → agent → turn
	if agentSpan.Parent.SpanID() != chatAgent.SpanContext.SpanID() {
		t.Errorf("the agent span's parent is %v, want the request's span", agentSpan.Parent.SpanID())
	}
	if turn.Parent.SpanID() != agentSpan.SpanContext.SpanID() {
		t.Errorf("turn 0's parent is %v, want the agent's span", turn.Parent.SpanID())
	}
	attrs := map[string]any{}
	for _, kv := range chatSim.Attributes {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	want := map[string]any{
		"openinference.span.kind": "CHAIN", "llm.model_name": "sim", "input.value": "hello",
		"output.value":           pass.Choices[0].Message.Content,
		"llm.token_count.prompt": pass.Usage.PromptTokens, "llm.token_count.completion": pass.Usage.CompletionTokens,
	}
	for k, v := range want {
		if got, _ := json.Marshal(attrs[k]); string(got) != mustJSON(v) {
			t.Errorf("chat sim %s = %v, want %v", k, attrs[k], v)
		}
	}
	if ag.Choices[0].Message.Content == "" {
		t.Error("agent answer empty")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTraceparentReachesUpstream checks that a request's trace context
// reaches the backend's server: the gateway's span is the parent named in
// the traceparent header the upstream receives.
func TestTraceparentReachesUpstream(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	tracer := telemetry.NewAgentTracer(tp)

	upstream, _ := simHTTP(t, simhttp.Config{Model: sim.Config{Seed: 2, ToolTurns: -1}})
	seen := make(chan string, 4)
	// The simulator's handler behind one that records the header: a
	// reverse proxy here (a new one per request, on the default
	// transport) answered 502 now and then under load, a flake of the
	// proxy, not of the gateway.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			seen <- r.Header.Get("traceparent")
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	cfg, err := backendopenai.ParseURL("sim+" + front.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WrapTransport = telemetry.Transport
	m, err := backendopenai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: m}},
		Tracer:   tracer, Observer: tracer,
	})
	if _, err := g.client("").Chat.Completions.New(t.Context(), userParams("sim", "hello")); err != nil {
		t.Fatal(err)
	}
	tp.ForceFlush(t.Context())
	var chat tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "chat sim" {
			chat = s
		}
	}
	if !chat.SpanContext.IsValid() {
		t.Fatal("no span for the request")
	}
	got := <-seen
	want := "00-" + chat.SpanContext.TraceID().String() + "-"
	if !strings.HasPrefix(got, want) {
		t.Errorf("upstream traceparent %q, want one of trace %s", got, chat.SpanContext.TraceID())
	}
}
