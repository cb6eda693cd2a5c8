package config_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/config"
)

// deployment is an in-process sim+http server on a free port.
type deployment struct {
	t    *testing.T
	addr string
	sim  *simhttp.Server

	mu sync.Mutex   // protects hs
	hs *http.Server // nil while killed
}

// newDeployment starts a sim+http server on a free port.
func newDeployment(t *testing.T, seed uint64) *deployment {
	t.Helper()
	srv, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: seed, ToolTurns: -1},
		MaxSeqs: 64, DecodeStep: simDecodeStep, DecodeStepPerSeq: time.Microsecond, PrefillPerToken: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, addr: ln.Addr().String(), sim: srv}
	d.serve(ln)
	t.Cleanup(func() { d.kill(); cancel(); wg.Wait() })
	return d
}

func (d *deployment) serve(ln net.Listener) {
	hs := &http.Server{Handler: d.sim}
	d.mu.Lock()
	d.hs = hs
	d.mu.Unlock()
	go func() { _ = hs.Serve(ln) }() // ends when kill closes hs
}

// kill closes the listener and the idle connections, and lets the calls
// in flight finish.
func (d *deployment) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.hs.Shutdown(ctx); err != nil {
			_ = d.hs.Close()
		}
		d.hs = nil
	}
}

// deploymentMetrics scrapes url's /metrics and returns, for each
// deployment, its requests_total and its breaker's current state.
func deploymentMetrics(t *testing.T, url string) (requests map[string]float64, state map[string]string) {
	t.Helper()
	requests, _, state = deploymentCounts(t, url)
	return requests, state
}

// deploymentCounts is deploymentMetrics with each deployment's
// failures_total.
func deploymentCounts(t *testing.T, url string) (requests, failures map[string]float64, state map[string]string) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	requests, failures, state = map[string]float64{}, map[string]float64{}, map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		lv := map[string]string{}
		for kv := range strings.SplitSeq(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			lv[k] = strings.Trim(v, `"`)
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "batchagent_deployment_requests_total":
			requests[lv["deployment"]] = v
		case "batchagent_deployment_failures_total":
			failures[lv["deployment"]] = v
		case "batchagent_deployment_breaker_state":
			if v == 1 {
				state[lv["deployment"]] = lv["state"]
			}
		}
	}
	return requests, failures, state
}

// failoverScenario serves one model on a (max_inflight 8) and b
// (max_inflight 4): 150 requests split about 2:1; 1,000 requests from 24
// clients, b killed once half are answered, all answered 200; b's breaker
// not closed after, then closed once b is back on its port; and b gets
// calls again. It returns b's failures_total after the kill.
func failoverScenario(t *testing.T, a *deployment, b *procDeployment) float64 {
	t.Helper()
	yaml := fmt.Sprintf(`backends:
  m:
    deployments:
      - {name: a, url: "sim+http://%s", max_inflight: 8, fixed_inflight: true}
      - {name: b, url: "sim+http://%s", max_inflight: 4, fixed_inflight: true}
    cooldown: 300ms
`, a.addr, b.addr)
	sc, err := config.ParseServe([]byte(yaml), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := sc.Open(t.Context(), nil, nil, func(string) string { return "" })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer g.Close()
	hs := httptest.NewServer(g.Server)
	defer hs.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Server.Shutdown(ctx)
	}()
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(i int) error {
		body := fmt.Sprintf(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"request %d"}]}`, i)
		resp, err := client.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var sb strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
			return fmt.Errorf("request %d: status %d: %s", i, resp.StatusCode, sb.String())
		}
		return nil
	}
	// run sends n requests from 24 clients (more than the 12 slots) and
	// calls mid once half of them are answered.
	run := func(n int, mid func()) []error {
		var next, answered atomic.Int64
		var once sync.Once
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(n) {
						return
					}
					if err := post(int(i)); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					if answered.Add(1) >= int64(n/2) && mid != nil {
						once.Do(mid)
					}
				}
			})
		}
		wg.Wait()
		return errs
	}

	t0 := time.Now()
	phase := func(name string) { t.Logf("%v: %s", time.Since(t0).Round(time.Millisecond), name) }
	defer phase("end")
	if errs := run(150, nil); len(errs) > 0 {
		t.Fatalf("%d errors before the kill, first: %v", len(errs), errs[0])
	}
	reqs, _ := deploymentMetrics(t, hs.URL)
	if ratio := reqs["a"] / reqs["b"]; ratio < 1.2 || ratio > 3 {
		t.Errorf("split a:b = %v:%v (%.2f), want about 2:1 (max_inflight 8:4)", reqs["a"], reqs["b"], ratio)
	}

	phase("150 before the kill")
	before := reqs["b"]
	errs := run(1000, b.kill)
	phase("1000 with the kill")
	if len(errs) > 0 {
		t.Fatalf("%d client-visible errors of 1000 with b killed mid-run, first: %v", len(errs), errs[0])
	}
	reqs, failures, state := deploymentCounts(t, hs.URL)
	if state["b"] == "closed" {
		t.Errorf("b's breaker is %q after b died, want open or half-open", state["b"])
	}
	if state["a"] != "closed" {
		t.Errorf("a's breaker is %q, want closed", state["a"])
	}
	t.Logf("with b killed mid-run: requests a %v, b %v (b had %v before); b failed %v calls", reqs["a"], reqs["b"], before, failures["b"])

	b.restart()
	phase("restarted")
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		if err := post(i); err != nil {
			t.Fatalf("after b's restart: %v", err)
		}
		_, state = deploymentMetrics(t, hs.URL)
		if state["b"] == "closed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's breaker still %q 10s after its restart, want closed", state["b"])
		}
		time.Sleep(50 * time.Millisecond) // the breaker's cooldown (300ms) must pass
	}
	if errs := run(100, nil); len(errs) > 0 {
		t.Fatalf("%d errors after b's return, first: %v", len(errs), errs[0])
	}
	after, _ := deploymentMetrics(t, hs.URL)
	if after["b"] <= reqs["b"] {
		t.Errorf("b got no calls after its return (requests %v, then %v)", reqs["b"], after["b"])
	}
	return failures["b"]
}

// TestServeDeploymentsParse: deployments decode with their keys; a
// backend with both url and deployments, or neither, or a deployment
// without url or with a negative limit, is refused naming where.
func TestServeDeploymentsParse(t *testing.T) {
	sc, err := config.ParseServe([]byte(`backends:
  gpt:
    model: gpt-4o-mini
    cooldown: 2s
    deployments:
      - {name: eu, url: "sim://?seed=1", api_key_env: EU_KEY, weight: 2, max_inflight: 64, rpm: 600}
      - {url: "sim://?seed=2", model: other, fixed_inflight: true}
`), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := sc.Backends[0]
	want := []config.ServeDeployment{
		{Name: "eu", URL: "sim://?seed=1", APIKeyEnv: "EU_KEY", Weight: 2, MaxInflight: 64, RPM: 600},
		{URL: "sim://?seed=2", Model: "other", FixedInflight: true},
	}
	if len(b.Deployments) != 2 || b.Deployments[0] != want[0] || b.Deployments[1] != want[1] || b.Cooldown != 2*time.Second {
		t.Errorf("backend = %+v, want deployments %+v and cooldown 2s", b, want)
	}
	tests := []struct{ name, yaml, want string }{
		{"both", "backends:\n  m:\n    url: sim://\n    deployments: [{url: \"sim://\"}]\n", "backends.m: set url or deployments, not both"},
		{"neither", "backends:\n  m:\n    model: x\n", "backends.m.url: required key is missing"},
		{"no url", "backends:\n  m:\n    deployments: [{name: a}]\n", "backends.m.deployments[0].url: required key is missing"},
		{"negative", "backends:\n  m:\n    deployments: [{url: \"sim://\", weight: -1}]\n", "backends.m.deployments[0]: weight, max_inflight and rpm must be finite and not negative"},
		{"unknown key", "backends:\n  m:\n    deployments: [{url: \"sim://\", weigth: 1}]\n", "weigth"},
		{"negative cooldown", "backends:\n  m:\n    cooldown: -1s\n    deployments: [{url: \"sim://\"}]\n", "backends.m.cooldown: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseServe([]byte(tt.yaml), "serve.yaml", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseServe = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
