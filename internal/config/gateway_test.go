package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/config"
)

// chatCompletion posts a non-streamed chat completion for model to url
// and returns the status and the decoded answer.
func chatCompletion(t *testing.T, url, model, text string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decode: %v", model, err)
	}
	return resp.StatusCode, out
}

// TestServeExample opens examples/serve/serve.yaml and asks its backend
// and its agent.
func TestServeExample(t *testing.T) {
	sc, err := config.LoadServe(filepath.Join("..", "..", "examples", "serve", "serve.yaml"))
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
		if err := g.Server.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	if status, out := chatCompletion(t, hs.URL, "sim", "Say hello."); status != 200 {
		t.Errorf("sim: status %d %v, want 200", status, out)
	}
	status, out := chatCompletion(t, hs.URL, "agent:reviewer", "cache.go")
	if status != 200 {
		t.Fatalf("agent:reviewer: status %d %v, want 200", status, out)
	}
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	var findings struct {
		Risk     string
		Findings []any
	}
	if err := json.Unmarshal([]byte(msg["content"].(string)), &findings); err != nil || findings.Risk == "" {
		t.Errorf("agent:reviewer content %v, want the findings JSON (%v)", msg["content"], err)
	}
	if cost, _ := out["usage"].(map[string]any)["cost"].(float64); cost <= 0 {
		t.Errorf("agent:reviewer usage %v, want a cost (the example prices the agent)", out["usage"])
	}
	if events, _ := msg["batchagent_events"].([]any); len(events) < 3 {
		t.Errorf("agent:reviewer events %v, want turns and the read_file call", msg["batchagent_events"])
	}
}

// tiersServe serves an agent whose backend fails every call, with a
// fallback tier on the served backend "small". Its timeout bounds the
// agent with all its tiers: without the tier it fails within 5s.
const tiersServe = `backends:
  small:
    url: "sim://?seed=5"
agents:
  npc:
    backend: "sim://?fail=1"
    task: "Plan for {input}"
    output_schema:
      type: object
      properties:
        value: {type: integer}
      required: [value]
    limits: {budget: 1s, timeout: 5s}
    fallbacks: [{backend: "sim://?seed=5"}]
`

// TestServeAgentFallback checks that the gateway opens an agent's
// fallback tiers: the agent answers from its tier while its own backend
// fails every call.
func TestServeAgentFallback(t *testing.T) {
	sc, err := config.ParseServe([]byte(tiersServe), "serve.yaml", t.TempDir())
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
		if err := g.Server.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	status, out := chatCompletion(t, hs.URL, "agent:npc", "guard")
	if status != 200 {
		t.Fatalf("agent:npc: status %d %v, want 200 (answered by the fallback tier)", status, out)
	}
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	var plan struct{ Value *int }
	if err := json.Unmarshal([]byte(msg["content"].(string)), &plan); err != nil || plan.Value == nil {
		t.Errorf("agent:npc content %v, want the schema's object (%v)", msg["content"], err)
	}
}

// TestServeAgentFallbackOpenError checks that a fallback tier the gateway
// cannot open is an error naming the agent and the tier.
func TestServeAgentFallbackOpenError(t *testing.T) {
	sc, err := config.ParseServe([]byte("agents:\n  npc:\n    task: x\n    fallbacks: [{backend: \"sim://\"}, {backend: \"openai://\"}]\n"), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := sc.Open(t.Context(), nil, nil, func(string) string { return "" })
	if err == nil {
		g.Close()
		t.Fatal("Open succeeded, want an error for the tier without a key")
	}
	if want := "agents.npc.fallbacks[1]: backend openai://: no API key: set OPENAI_API_KEY"; err.Error() != want {
		t.Errorf("Open error = %q, want %q", err, want)
	}
}

// TestServeAgentTableWindow: a served agent gets its model's context
// window from the built-in table, as a run's job does: a max_tokens that
// leaves it no room is refused when the gateway opens, naming the agent.
func TestServeAgentTableWindow(t *testing.T) {
	const conf = `agents:
  writer:
    backend: "sim://?seed=5"
    model: gpt-4o
    task: "Write about {input}"
    max_tokens: 200000
`
	sc, err := config.ParseServe([]byte(conf), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := sc.Open(t.Context(), nil, nil, func(string) string { return "" })
	if err == nil {
		g.Close()
		t.Fatal("Open accepted max_tokens 200000 for gpt-4o, whose table window is 128000")
	}
	if !strings.Contains(err.Error(), "agents.writer") || !strings.Contains(err.Error(), "context window of 128000") {
		t.Errorf("Open: %v; want the agent and gpt-4o's window named", err)
	}
}

// TestServeKeyMaxCostOpen: a key's max_cost reaches the server, and a
// served model no price covers is named in the log at start, once.
func TestServeKeyMaxCostOpen(t *testing.T) {
	sc, err := config.ParseServe([]byte("backends:\n  unpriced-backend:\n    url: sim://\n  gpt:\n    url: sim://\n    model: gpt-4o-mini\nkeys:\n  - name: ci\n    env: CI_KEY\n    max_cost: 3\n"), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	g, err := sc.Open(t.Context(), nil, slog.New(slog.NewTextHandler(&buf, nil)), func(string) string { return "sk-ci" })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer g.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Server.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	if sp := g.Server.Spend(); len(sp) != 1 || sp[0].Name != "ci" || sp[0].Limit != 3 {
		t.Errorf("Spend() = %+v, want key ci capped at $3", sp)
	}
	log := buf.String()
	if strings.Count(log, "unpriced-backend") != 1 || !strings.Contains(log, "no known price") {
		t.Errorf("log = %q, want one warning naming unpriced-backend", log)
	}
	if strings.Contains(log, "model=gpt") {
		t.Errorf("log = %q warns of gpt, which the table prices (gpt-4o-mini)", log)
	}
}

// TestServeKeySpendMetrics: serve's /metrics carries each capped key's
// spend and cap by the key's name, never the key itself.
func TestServeKeySpendMetrics(t *testing.T) {
	sc, err := config.ParseServe([]byte("backends:\n  gpt:\n    url: sim://\n    model: gpt-4o-mini\nkeys:\n  - name: ci\n    env: CI_KEY\n    max_cost: 3\n  - name: free\n    env: FREE_KEY\n"), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"CI_KEY": "sk-ci-secret", "FREE_KEY": "sk-free-secret"}
	g, err := sc.Open(t.Context(), nil, slog.New(slog.DiscardHandler), func(k string) string { return secrets[k] })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer g.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Server.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	srv := httptest.NewServer(g.Server)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt","messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer sk-ci-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completion by key ci: %s", resp.Status)
	}
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	metrics := body.String()
	gauge := func(name string) (float64, bool) {
		for line := range strings.SplitSeq(metrics, "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				var f float64
				if _, err := fmt.Sscan(v, &f); err != nil {
					t.Fatalf("%s: value %q: %v", name, v, err)
				}
				return f, true
			}
		}
		return 0, false
	}
	if v, ok := gauge(`batchagent_key_spend_limit_dollars{key="ci"}`); !ok || v != 3 {
		t.Errorf("limit gauge of ci = %v (present %v), want 3; metrics:\n%s", v, ok, metrics)
	}
	if v, ok := gauge(`batchagent_key_spend_dollars{key="ci"}`); !ok || v <= 0 || v >= 3 {
		t.Errorf("spend gauge of ci = %v (present %v), want the cost of one call, above 0 and under the cap", v, ok)
	}
	if v, ok := gauge(`batchagent_key_spend_reserved_dollars{key="ci"}`); !ok || v != 0 {
		t.Errorf("reserved gauge of ci = %v (present %v), want 0 with no call in flight", v, ok)
	}
	if strings.Contains(metrics, `key="free"`) {
		t.Errorf("metrics carry key free, which has no cap")
	}
	if strings.Contains(metrics, "secret") {
		t.Errorf("metrics carry a key's secret")
	}
}
