package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestBenchLiveCLI runs `bench live` through the CLI against the HTTP
// simulator behind an API key, as scripts call it (GNU-style flags), and
// checks the JSON lines BENCHMARKS.md defines for live.
func TestBenchLiveCLI(t *testing.T) {
	addr, srv := startSimServer(t, simhttp.Config{Model: sim.Config{ToolTurns: -1, Seed: 5}, MaxSeqs: 4, APIKey: "live-key",
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 100 * time.Microsecond})
	t.Setenv("OPENAI_API_KEY", "live-key")
	code, stdout, stderr := run(t, t.Context(), "bench", "live", "--backend", "openai+http://"+addr+"/v1",
		"--model", "sim", "-n", "10", "--max-tokens", "40", "--mode", "naive,engine", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var modes []string
	var calls float64
	for s := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		for _, k := range []string{"scenario", "mode", "n", "wall_s", "ideal_s", "ratio", "agents_per_s", "ok", "failed",
			"tool_requested", "tool_executed", "llm_calls", "peak_rss_mb", "cpu_s", "ttft_p50_s", "ttft_p95_s", "cached_share", "http_429"} {
			if _, ok := r[k]; !ok {
				t.Errorf("line lacks %q: %s", k, s)
			}
		}
		if r["scenario"] != "live" || r["n"] != 10.0 || r["ok"] != 10.0 || r["failed"] != 0.0 || r["max_tokens"] != 40.0 {
			t.Errorf("%v: scenario %v n %v ok %v failed %v max_tokens %v; want live, 10, 10, 0, 40",
				r["mode"], r["scenario"], r["n"], r["ok"], r["failed"], r["max_tokens"])
		}
		if c, _ := r["llm_calls"].(float64); c < 10 {
			t.Errorf("%v: llm_calls %v, want >= 10", r["mode"], r["llm_calls"])
		}
		if p, _ := r["ttft_p50_s"].(float64); p <= 0 {
			t.Errorf("%v: ttft_p50_s %v, want > 0", r["mode"], r["ttft_p50_s"])
		}
		calls += r["llm_calls"].(float64)
		modes = append(modes, r["mode"].(string))
	}
	if len(modes) != 2 || modes[0] != "naive" || modes[1] != "engine" {
		t.Errorf("modes %v, want [naive engine] as --mode lists them", modes)
	}
	// The key reached the server: no request was refused for want of it,
	// and every model call (plus the 4 solo runs of ideal_s) arrived.
	if got := srv.Stats().Requests; float64(got) != calls+4 {
		t.Errorf("server saw %d requests, want llm_calls %v + 4", got, calls)
	}
}

// TestBenchLiveUsage checks that live needs --backend and that the live
// flags are refused by the other scenarios (exit 2).
func TestBenchLiveUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bench", "live"}, "--backend URL is required"},
		{[]string{"bench", "fair", "--backend", "ollama://"}, "live scenario only"},
		{[]string{"bench", "live", "--backend", "ollama://", "--max-tokens", "-1"}, "--max-tokens -1 is negative"},
	}
	for _, tt := range tests {
		code, _, stderr := run(t, t.Context(), tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
