package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ratingSchema = `{"type":"object","properties":{"score":{"type":"integer","minimum":1,"maximum":5}},"required":["score"]}`

// lookupTool is a cacheable tool that counts its executions and returns
// lookupResult.
func lookupTool(executions *atomic.Int64, args *atomic.Value) tool.Tool {
	return tool.Func(tool.Spec{
		Name:        "lookup",
		Description: "Look up a product's category.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"product":{"type":"string"}},"required":["product"]}`),
		Cacheable:   true,
	}, func(ctx context.Context, a json.RawMessage) (string, error) {
		executions.Add(1)
		if args != nil {
			args.Store(string(a))
		}
		return lookupResult, nil
	})
}

const lookupResult = `{"category":"home"}`

// newSpec returns a spec on the simulator, model name "sim-1": one tool
// turn (the lookup tool), then a rating.
func newSpec(t *testing.T, args *atomic.Value) *batchagent.Spec {
	t.Helper()
	model, err := sim.New(sim.Config{Seed: 1, ToolTurns: 1})
	if err != nil {
		t.Fatal(err)
	}
	var executions atomic.Int64
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID:           "review",
		Model:        model,
		ModelName:    "sim-1",
		Task:         "Look up product: {product} and rate it.",
		Tools:        []tool.Tool{lookupTool(&executions, args)},
		OutputSchema: json.RawMessage(ratingSchema),
	})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// scrape GETs url and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// value returns the value of the series of family name with labels (a
// counter's, a gauge's, or a histogram's sample count), and whether it
// exists.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsAfterEngineRun(t *testing.T) {
	engine, err := batchagent.New(batchagent.Config{Admission: batchagent.Admission{MaxInflight: 4, FixedInflight: true}})
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	if err := m.Watch(engine); err != nil {
		t.Fatalf("Watch = %v", err)
	}
	if err := m.Watch(engine); !errors.Is(err, telemetry.ErrWatching) {
		t.Errorf("second Watch = %v, want ErrWatching", err)
	}

	inputs := []batchagent.Input{{"product": "kettle"}, {"product": "kettle"}, {"product": "kettle"}}
	results, err := engine.Run(t.Context(), newSpec(t, nil), batchagent.Slice(inputs))
	if err != nil {
		t.Fatal(err)
	}
	var usage llm.Usage
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("result %d: %v", r.Index, r.Err)
		}
		m.Result("review", r)
		usage = usage.Add(r.Usage)
	}
	if usage.PromptTokens == 0 || usage.CompletionTokens == 0 {
		t.Fatalf("usage %+v: the simulator reported no tokens", usage)
	}
	m.Call("sim-1", 20*time.Millisecond, 50*time.Millisecond, llm.Usage{PromptTokens: 7, CompletionTokens: 5, CachedTokens: 3, MediaTokens: 4}, nil)
	m.Call("sim-1", 0, time.Millisecond, llm.Usage{}, errors.New("refused"))

	mux := http.NewServeMux()
	mux.Handle("GET /ping", m.Handler("/ping", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("teapot") {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		_, _ = w.Write([]byte("pong"))
	})))
	mux.Handle("GET /metrics", m.Exposition())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, q := range []string{"", "", "?teapot"} {
		resp, err := http.Get(srv.URL + "/ping" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	fams := scrape(t, srv.URL+"/metrics")
	job := map[string]string{"job": "review"}
	backend := map[string]string{"backend": "sim-1"}
	lookup := map[string]string{"tool": "lookup"}
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"batchagent_http_requests_total", map[string]string{"route": "/ping", "code": "200", "method": "get"}, 2},
		{"batchagent_http_requests_total", map[string]string{"route": "/ping", "code": "418", "method": "get"}, 1},
		{"batchagent_http_request_duration_seconds", map[string]string{"route": "/ping", "code": "200", "method": "get"}, 2},
		{"batchagent_http_requests_in_flight", map[string]string{"route": "/ping"}, 0},

		{"batchagent_agent_results_total", map[string]string{"job": "review", "kind": "ok"}, 3},
		{"batchagent_ttft_seconds", map[string]string{"source": "agent", "name": "review"}, 3},
		{"batchagent_agent_queue_wait_seconds", job, 3},
		{"batchagent_agent_duration_seconds", job, 3},
		{"batchagent_tokens_total", map[string]string{"source": "agent", "name": "review", "type": "prompt"}, float64(usage.PromptTokens)},
		{"batchagent_tokens_total", map[string]string{"source": "agent", "name": "review", "type": "completion"}, float64(usage.CompletionTokens)},
		{"batchagent_tokens_total", map[string]string{"source": "agent", "name": "review", "type": "cached"}, float64(usage.CachedTokens)},

		{"batchagent_calls_total", map[string]string{"model": "sim-1", "result": "ok"}, 1},
		{"batchagent_calls_total", map[string]string{"model": "sim-1", "result": "error"}, 1},
		{"batchagent_call_duration_seconds", map[string]string{"model": "sim-1"}, 2},
		{"batchagent_ttft_seconds", map[string]string{"source": "call", "name": "sim-1"}, 1}, // the failed call had no first token
		{"batchagent_tokens_total", map[string]string{"source": "call", "name": "sim-1", "type": "prompt"}, 7},
		{"batchagent_tokens_total", map[string]string{"source": "call", "name": "sim-1", "type": "completion"}, 5},
		{"batchagent_tokens_total", map[string]string{"source": "call", "name": "sim-1", "type": "cached"}, 3},
		{"batchagent_tokens_total", map[string]string{"source": "call", "name": "sim-1", "type": "media"}, 4},

		{"batchagent_backend_limit", backend, 4},
		{"batchagent_backend_inflight", backend, 0},
		{"batchagent_backend_waiting", backend, 0},
		{"batchagent_backend_throttles_total", backend, 0},
		{"batchagent_backend_pauses_total", backend, 0},
		{"batchagent_tool_calls_total", lookup, 3},
		{"batchagent_tool_executions_total", lookup, 1},
		{"batchagent_tool_errors_total", lookup, 0},
		{"batchagent_agents_started_total", nil, 3},
		{"batchagent_agents_done_total", map[string]string{"result": "ok"}, 3},
		{"batchagent_agents_done_total", map[string]string{"result": "failed"}, 0},
		{"batchagent_agents_restored_total", nil, 0},
		{"batchagent_agents_running", nil, 0},
		{"batchagent_agent_failures_total", map[string]string{"kind": "timeout"}, 0},
		{"batchagent_model_calls_total", nil, 6},
		{"batchagent_turns_total", nil, 6},
		{"batchagent_checkpoint_errors_total", nil, 0},
	}
	for _, w := range want {
		got, ok := value(fams, w.name, w.labels)
		if !ok {
			t.Errorf("%s%v: missing", w.name, w.labels)
			continue
		}
		if got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
	// The two calls not executed were served by the one execution: joined
	// while it ran, or from the cache after; which depends on timing.
	co, _ := value(fams, "batchagent_tool_coalesced_total", lookup)
	hits, _ := value(fams, "batchagent_tool_cache_hits_total", lookup)
	if co+hits != 2 {
		t.Errorf("tool coalesced %v + cache hits %v = %v, want 2", co, hits, co+hits)
	}
	if n := len(fams["batchagent_agent_failures_total"].GetMetric()); n != len(batchagent.Kinds) {
		t.Errorf("batchagent_agent_failures_total has %d series, want one per kind (%d)", n, len(batchagent.Kinds))
	}
	// Every family is ours, the runtime's or the exposition handler's, and documented.
	var names []string
	for name, f := range fams {
		if !strings.HasPrefix(name, "batchagent_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			names = append(names, name)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
	}
	sort.Strings(names)
	if len(names) > 0 {
		t.Errorf("families without the batchagent_ prefix: %v", names)
	}
}

// TestHandlerKeepsFlusher checks that an instrumented handler can still
// stream: SSE responses flush through the wrapper.
func TestHandlerKeepsFlusher(t *testing.T) {
	m := telemetry.NewMetrics()
	flushed := make(chan bool, 1) // one request
	h := m.Handler("/v1/chat/completions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := http.NewResponseController(w).Flush()
		flushed <- err == nil
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !<-flushed {
		t.Error("Flush through Metrics.Handler failed, want the writer's Flusher kept")
	}
}

// TestMetricsCountTiers: results answered by a fallback tier are counted
// by tier, beside the breakers' state changes.
func TestMetricsCountTiers(t *testing.T) {
	engine, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	if err := m.Watch(engine); err != nil {
		t.Fatal(err)
	}
	dead, err := sim.New(sim.Config{Seed: 1, FailRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: "tiers", Model: dead, Task: "plan {who}", NoRetries: true, NoOutageBudget: true,
		Fallbacks: []batchagent.Fallback{{Func: func(ctx context.Context, in batchagent.Input) (json.RawMessage, error) {
			return json.RawMessage(`"wait"`), nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	results, err := engine.Run(t.Context(), spec, batchagent.Slice([]batchagent.Input{{"who": "a"}, {"who": "b"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil || r.Tier != 1 {
			t.Fatalf("result %d: tier %d, %v; want tier 1", r.Index, r.Tier, r.Err)
		}
	}
	srv := httptest.NewServer(m.Exposition())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	if v, ok := value(fams, "batchagent_results_by_tier_total", map[string]string{"tier": "1"}); !ok || v != 2 {
		t.Errorf("results_by_tier_total{tier=1} = %v (%t), want 2", v, ok)
	}
	if _, ok := value(fams, "batchagent_breaker_changes_total", nil); !ok {
		t.Error("no breaker_changes_total")
	}
}

// TestMetricsWatchCost: the cost is read at each scrape; the projection
// appears only while the cost reports one; a second watch is refused.
func TestMetricsWatchCost(t *testing.T) {
	m := telemetry.NewMetrics()
	var cost atomic.Value
	cost.Store(telemetry.Cost{Spent: 0.5})
	if err := m.WatchCost("review", func() telemetry.Cost { return cost.Load().(telemetry.Cost) }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Exposition())
	defer srv.Close()
	job := map[string]string{"job": "review"}
	fams := scrape(t, srv.URL)
	if v, ok := value(fams, "batchagent_cost_dollars", job); !ok || v != 0.5 {
		t.Errorf("cost_dollars = %v, %v; want 0.5", v, ok)
	}
	if v, ok := value(fams, "batchagent_cost_projected_dollars", job); ok {
		t.Errorf("cost_projected_dollars = %v with no projection, want no series", v)
	}
	cost.Store(telemetry.Cost{Spent: 1.25, Projected: 5, Projecting: true})
	fams = scrape(t, srv.URL)
	if v, ok := value(fams, "batchagent_cost_dollars", job); !ok || v != 1.25 {
		t.Errorf("cost_dollars = %v, %v; want 1.25", v, ok)
	}
	if v, ok := value(fams, "batchagent_cost_projected_dollars", job); !ok || v != 5 {
		t.Errorf("cost_projected_dollars = %v, %v; want 5", v, ok)
	}
	if err := m.WatchCost("other", func() telemetry.Cost { return telemetry.Cost{} }); err == nil {
		t.Error("a second WatchCost succeeded, want an error")
	}
}
