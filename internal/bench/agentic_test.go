package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestAgentic runs the agentic scenario small and fast: every agent runs
// its scripted turns in every mode, the work is the same in each, and the
// server's measures hang together (the bound below the makespan, cached
// and recomputed tokens within the prompt tokens).
func TestAgentic(t *testing.T) {
	var out bytes.Buffer
	modes := []string{"naive", "las+cont", "engine"}
	reps, err := bench.RunAgentic(t.Context(), bench.AgenticOptions{N: 60, TimeScale: 0.01, Modes: modes, JSON: true}, &out)
	if err != nil {
		t.Fatalf("RunAgentic: %v", err)
	}
	if len(reps) != len(modes) {
		t.Fatalf("%d reports, want %d", len(reps), len(modes))
	}
	for i, r := range reps {
		if r.Mode != modes[i] || r.OK != 60 || r.Failed != 0 {
			t.Errorf("report %d: mode %s, ok %d, failed %d; want %s, 60, 0", i, r.Mode, r.OK, r.Failed, modes[i])
		}
		if r.LLMCalls != reps[0].LLMCalls || r.ToolCalls != reps[0].ToolCalls || r.ToolCalls != r.LLMCalls-60 {
			t.Errorf("%s: %d model calls, %d tool calls; want naive's %d and %d, one tool call per turn but the last",
				r.Mode, r.LLMCalls, r.ToolCalls, reps[0].LLMCalls, reps[0].ToolCalls)
		}
		if r.BoundS <= 0 || r.BoundS > r.MakespanS || r.MeanDoneS > r.MakespanS || r.P95DoneS > r.MakespanS || r.Busy <= 0 || r.Busy > 1.05 {
			t.Errorf("%s: bound %v, mean %v, p95 %v, makespan %v, busy %v; want 0 < bound <= makespan, times within it, busy in (0, 1]",
				r.Mode, r.BoundS, r.MeanDoneS, r.P95DoneS, r.MakespanS, r.Busy)
		}
		if r.CachedShare <= 0.5 || r.PrefillTokens <= 0 || r.RecomputedTokens > r.PrefillTokens || r.CacheLostShare < 0 || r.CacheLostShare > 1 {
			t.Errorf("%s: cached %v, prefill %d, recomputed %d, lost %v; want the shared prompt cached and recomputed within prefill",
				r.Mode, r.CachedShare, r.PrefillTokens, r.RecomputedTokens, r.CacheLostShare)
		}
	}
	if reps[0].Policy != "" || reps[1].Policy != "las+cont" || reps[2].Policy == "" {
		t.Errorf("policies %q, %q, %q; want none for naive, las+cont, the default's name", reps[0].Policy, reps[1].Policy, reps[2].Policy)
	}
	if reps[1].MeanVsNaive == nil || reps[1].MakespanVsNaive == nil {
		t.Error("las+cont: mean_vs_naive or makespan_vs_naive missing")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(modes) {
		t.Fatalf("output %q, want %d JSON lines", out.String(), len(modes))
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		for _, k := range []string{"mean_done_s", "p95_done_s", "makespan_s", "bound_s", "busy", "cached_share", "recomputed_tokens", "cache_lost_share", "wall_s", "ok", "failed", "llm_calls", "peak_rss_mb", "cpu_s"} {
			if _, ok := v[k]; !ok {
				t.Errorf("line %s: no %s", l, k)
			}
		}
	}
}

func TestAgenticBadOptions(t *testing.T) {
	for _, opt := range []bench.AgenticOptions{{N: -1}, {TimeScale: -1}, {Modes: []string{"srpt"}}} {
		if _, err := bench.RunAgentic(t.Context(), opt, new(bytes.Buffer)); err == nil {
			t.Errorf("RunAgentic(%+v) = nil error, want error", opt)
		}
	}
}

func TestAgenticOptionsThroughRun(t *testing.T) {
	for _, tt := range []struct {
		scenario string
		opt      bench.Options
		want     string
	}{
		{"fair", bench.Options{TimeScale: 0.1}, "--time-scale applies to the agentic scenario only"},
		{"agentic", bench.Options{Fail: 0.1}, "agentic takes only"},
		{"agentic", bench.Options{Modes: []string{"srpt"}}, `unknown mode "srpt"`},
	} {
		_, err := bench.Run(t.Context(), tt.scenario, tt.opt, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run(%s, %+v) = %v, want an error containing %q", tt.scenario, tt.opt, err, tt.want)
		}
	}
}
