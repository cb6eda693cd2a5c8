package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
)

// heuristic is a func tier: it answers {"value": the input's id} at once.
func heuristic(calls *atomic.Int64) func(ctx context.Context, in batchagent.Input) (json.RawMessage, error) {
	return func(ctx context.Context, in batchagent.Input) (json.RawMessage, error) {
		calls.Add(1)
		return json.RawMessage(fmt.Sprintf(`{"value":%v,"first_word":"rule"}`, in["id"])), nil
	}
}

// TestBudgetExpiryFallsBackToFunc: a primary slower than the budget never
// answers; every agent's result comes from the func tier when the budget
// ends, as tier 1, and Stats counts them by tier.
func TestBudgetExpiryFallsBackToFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		e := newEngine(t, batchagent.Config{})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Second}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
			Budget: 2 * time.Second, Fallbacks: []batchagent.Fallback{{Func: heuristic(&calls)}},
		}), batchagent.Slice(inputs(4)))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Tier != 1 {
				t.Fatalf("result %d: tier %d err %v, want tier 1 and no error", i, r.Tier, r.Err)
			}
			if want := fmt.Sprintf(`{"value":%d,"first_word":"rule"}`, i); string(r.Output) != want {
				t.Errorf("result %d output %s, want %s", i, r.Output, want)
			}
			if r.Timings.Total != 2*time.Second {
				t.Errorf("result %d total %v, want the 2s budget", i, r.Timings.Total)
			}
			b, _ := json.Marshal(r)
			var line struct{ Tier int }
			if err := json.Unmarshal(b, &line); err != nil || line.Tier != 1 {
				t.Errorf("result %d JSON %s: tier %d (%v), want 1", i, b, line.Tier, err)
			}
		}
		if calls.Load() != 4 {
			t.Errorf("heuristic called %d times, want 4", calls.Load())
		}
		if s := e.Stats(); s.ByTier[1] != 4 || s.ByTier[0] != 0 || s.OK != 4 {
			t.Errorf("stats by tier %v, ok %d; want {1:4}, 4", s.ByTier, s.OK)
		}
	})
}

// TestBudgetExpiryFallsBackToModel: the next tier is a faster model; it
// answers within a quarter of the budget once the budget is spent, and a
// func tier after it is not called.
func TestBudgetExpiryFallsBackToModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Second}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
			Budget: time.Second,
			Fallbacks: []batchagent.Fallback{
				{Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond})},
				{Func: heuristic(&calls)},
			},
		}), batchagent.Slice(inputs(3)))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Tier != 1 || r.Output == nil {
				t.Fatalf("result %d: tier %d output %s err %v, want tier 1's output", i, r.Tier, r.Output, r.Err)
			}
			if r.Timings.Total != 1100*time.Millisecond {
				t.Errorf("result %d total %v, want 1.1s (budget, then the fallback's latency)", i, r.Timings.Total)
			}
		}
		if calls.Load() != 0 {
			t.Errorf("heuristic called %d times, want 0", calls.Load())
		}
	})
}

// TestNoFallbacksUnchanged: a job without fallbacks has no budget and its
// failures stay errors at tier 0.
func TestNoFallbacksUnchanged(t *testing.T) {
	spec := mustSpec(t, batchagent.Def{Model: newSim(t, sim.Config{}), Task: "x"})
	if b, fbs := spec.Budget(); b != 0 || fbs != nil {
		t.Errorf("Budget() = %v, %v; want 0, nil", b, fbs)
	}
	if d := mustSpec(t, batchagent.Def{Model: newSim(t, sim.Config{}), Task: "x",
		Fallbacks: []batchagent.Fallback{{Model: newSim(t, sim.Config{})}}}).Def(); d.Budget != batchagent.DefaultBudget {
		t.Errorf("default budget %v, want %v", d.Budget, batchagent.DefaultBudget)
	}
	srv, _ := deadServer(t)
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: srv, Task: "{id}", NoRetries: true, NoOutageBudget: true,
	}), batchagent.Slice(inputs(2)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if k := batchagent.KindOf(r.Err); k != batchagent.KindBackend || r.Tier != 0 {
			t.Errorf("result %d: kind %q tier %d, want backend at tier 0", r.Index, k, r.Tier)
		}
	}
}

func TestBadFallbacks(t *testing.T) {
	m := newSim(t, sim.Config{})
	f := func(context.Context, batchagent.Input) (json.RawMessage, error) { return nil, nil }
	for name, d := range map[string]batchagent.Def{
		"neither":         {Model: m, Task: "x", Fallbacks: []batchagent.Fallback{{}}},
		"both":            {Model: m, Task: "x", Fallbacks: []batchagent.Fallback{{Model: m, Func: f}}},
		"negative budget": {Model: m, Task: "x", Budget: -time.Second},
	} {
		if _, err := batchagent.NewSpec(d); !errors.Is(err, batchagent.ErrBadJob) {
			t.Errorf("%s: NewSpec = %v, want ErrBadSpec", name, err)
		}
	}
	if _, err := batchagent.New(batchagent.Config{Breaker: batchagent.Breaker{Failures: -1}}); !errors.Is(err, batchagent.ErrBadConfig) {
		t.Errorf("New with negative breaker failures = %v, want ErrBadConfig", err)
	}
}

// deadServer returns an OpenAI-compatible backend that answers 500 until
// healthy is set, and the count of requests it received.
func deadServer(t *testing.T) (*openai.Model, *server) {
	t.Helper()
	s := &server{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if !s.healthy.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"down","type":"server_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"{\"value\":7,\"first_word\":\"model\"}"},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

type server struct {
	requests atomic.Int64
	healthy  atomic.Bool
}

// TestBreakerOpensSkipsHalfOpensCloses: a dead primary fails three agents
// in a row, which opens its breaker; later agents go straight to the func
// tier without a request to it. After the cooldown one agent probes the
// recovered primary, which closes the breaker, and later agents use it.
func TestBreakerOpensSkipsHalfOpensCloses(t *testing.T) {
	const cooldown = 50 * time.Millisecond
	primary, srv := deadServer(t)
	var calls atomic.Int64
	e := newEngine(t, batchagent.Config{MaxActive: 1, Breaker: batchagent.Breaker{Failures: 3, Cooldown: cooldown}})
	spec := mustSpec(t, batchagent.Def{
		Model: primary, Task: "{id}", OutputSchema: json.RawMessage(outSchema), NoRetries: true, NoOutageBudget: true,
		Fallbacks: []batchagent.Fallback{{Func: heuristic(&calls)}},
	})
	res, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(10)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || r.Tier != 1 {
			t.Errorf("result %d: tier %d err %v, want tier 1", r.Index, r.Tier, r.Err)
		}
	}
	if n := srv.requests.Load(); n != 3 {
		t.Errorf("primary got %d requests, want 3: the breaker opens after 3 failures", n)
	}
	if s := e.Stats(); s.BreakerChanges != 1 {
		t.Errorf("breaker changes %d, want 1 (closed to open)", s.BreakerChanges)
	}
	// Still open: no request.
	if _, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(2))); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 3 {
		t.Errorf("primary got %d requests while open, want 3", n)
	}
	srv.healthy.Store(true)
	time.Sleep(2 * cooldown) // waits out the cooldown; not an assertion
	res, err = e.Run(t.Context(), spec, batchagent.Slice(inputs(4)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || r.Tier != 0 || string(r.Output) != `{"value":7,"first_word":"model"}` {
			t.Errorf("result %d after recovery: tier %d output %s err %v, want the primary's", r.Index, r.Tier, r.Output, r.Err)
		}
	}
	if n := srv.requests.Load(); n != 7 {
		t.Errorf("primary got %d requests, want 7 (3 failed, 4 after it closed)", n)
	}
	s := e.Stats()
	if s.BreakerChanges != 3 {
		t.Errorf("breaker changes %d, want 3 (open, half-open, closed)", s.BreakerChanges)
	}
	if s.ByTier[0] != 4 || s.ByTier[1] != 12 {
		t.Errorf("by tier %v, want {0:4 1:12}", s.ByTier)
	}
}

// TestFuncTierLast: a dead primary and a dead fallback model: the func
// tier, last, answers as tier 2.
func TestFuncTierLast(t *testing.T) {
	primary, _ := deadServer(t)
	second, srv2 := deadServer(t)
	var calls atomic.Int64
	res, err := batchagent.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: primary, Task: "{id}", OutputSchema: json.RawMessage(outSchema), NoRetries: true, NoOutageBudget: true,
		Fallbacks: []batchagent.Fallback{{Model: second}, {Func: heuristic(&calls)}},
	}), batchagent.Slice(inputs(2)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || r.Tier != 2 {
			t.Errorf("result %d: tier %d err %v, want tier 2", r.Index, r.Tier, r.Err)
		}
	}
	if srv2.requests.Load() != 2 || calls.Load() != 2 {
		t.Errorf("fallback model got %d requests, heuristic %d calls; want 2 and 2", srv2.requests.Load(), calls.Load())
	}
}

func TestBudgetFrom(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if d, err := batchagent.BudgetFrom(getenv); d != 0 || err != nil {
		t.Errorf("unset: %v, %v; want 0, nil", d, err)
	}
	env[batchagent.BudgetEnv] = "2s"
	if d, err := batchagent.BudgetFrom(getenv); d != 2*time.Second || err != nil {
		t.Errorf("2s: %v, %v; want 2s, nil", d, err)
	}
	for _, v := range []string{"soon", "-1s", "0s"} {
		env[batchagent.BudgetEnv] = v
		if _, err := batchagent.BudgetFrom(getenv); err == nil {
			t.Errorf("%q: no error", v)
		}
	}
}

// TestSubmitSlowPrimaryKeepsBreakerClosed: Submit's agents (a game loop's)
// on a primary slower than the budget fall back when the budget ends. A
// slow backend is no failed one: its breaker stays closed, and every agent
// tries it again within its budget.
func TestSubmitSlowPrimaryKeepsBreakerClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		e := newEngine(t, batchagent.Config{Breaker: batchagent.Breaker{Failures: 2, Cooldown: time.Minute}})
		spec := mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Second}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
			Budget: time.Second, Fallbacks: []batchagent.Fallback{{Func: heuristic(&calls)}},
		})
		for i := range 3 {
			h := e.Submit(t.Context(), spec, batchagent.Input{"id": i})
			r, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := time.Second
			if r.Err != nil || r.Tier != 1 || r.Timings.Total != want {
				t.Errorf("agent %d: tier %d total %v err %v; want tier 1 after %v", i, r.Tier, r.Timings.Total, r.Err, want)
			}
		}
		if s := e.Stats(); s.ByTier[1] != 3 || s.BreakerChanges != 0 {
			t.Errorf("by tier %v, breaker changes %d; want {1:3}, 0", s.ByTier, s.BreakerChanges)
		}
		if err := e.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTierBreakers: each backend has its own breaker. With the primary and
// the fallback model both dead, both breakers open after two agents, and
// the later agents go straight to the func tier.
func TestTierBreakers(t *testing.T) {
	primary, srv1 := deadServer(t)
	second, srv2 := deadServer(t)
	var calls atomic.Int64
	e := newEngine(t, batchagent.Config{MaxActive: 1, Breaker: batchagent.Breaker{Failures: 2, Cooldown: time.Hour}})
	res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
		Model: primary, Task: "{id}", OutputSchema: json.RawMessage(outSchema), NoRetries: true, NoOutageBudget: true,
		Fallbacks: []batchagent.Fallback{{Model: second, ModelName: "small"}, {Func: heuristic(&calls)}},
	}), batchagent.Slice(inputs(6)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || r.Tier != 2 {
			t.Errorf("result %d: tier %d err %v, want tier 2", r.Index, r.Tier, r.Err)
		}
	}
	if n1, n2 := srv1.requests.Load(), srv2.requests.Load(); n1 != 2 || n2 != 2 {
		t.Errorf("requests: primary %d, fallback model %d; want 2 and 2", n1, n2)
	}
	if s := e.Stats(); s.BreakerChanges != 2 || s.ByTier[2] != 6 {
		t.Errorf("breaker changes %d, by tier %v; want 2 (both opened), {2:6}", s.BreakerChanges, s.ByTier)
	}
}
