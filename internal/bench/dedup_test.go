package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/internal/bench"
)

func TestDedup(t *testing.T) {
	const n = 60
	var out bytes.Buffer
	reports, err := bench.Run(t.Context(), "dedup", bench.Options{N: n, JSON: true}, &out)
	if err != nil {
		t.Fatalf("Run(dedup) error = %v", err)
	}
	var modes []string
	for _, r := range reports {
		modes = append(modes, r.Mode)
		if r.Scenario != "dedup" || r.N != n || r.OK != n || r.Failed != 0 || r.ToolRequested != n || r.LLMCalls != 2*n {
			t.Errorf("%s: Report = %+v, want scenario dedup, n, ok and tool_requested %d, 0 failed, %d llm_calls", r.Mode, r, n, 2*n)
		}
		saved := r.ToolCacheHits + r.ToolCoalesced
		switch r.Mode {
		case "cache":
			// Agents run in 10 waves: the first coalesces, the rest hit
			// the cache.
			if r.ToolExecuted != 1 || saved != n-1 || r.ToolCacheHits < n-n/10 {
				t.Errorf("cache: tool_executed = %d, tool_cache_hits = %d, tool_coalesced = %d, want 1, at least %d, and %d in all",
					r.ToolExecuted, r.ToolCacheHits, r.ToolCoalesced, n-n/10, n-1)
			}
		case "coalesce":
			if r.ToolExecuted != 1 || r.ToolCoalesced != n-1 || r.ToolCacheHits != 0 {
				t.Errorf("coalesce: tool_executed = %d, tool_coalesced = %d, tool_cache_hits = %d, want 1, %d, 0", r.ToolExecuted, r.ToolCoalesced, r.ToolCacheHits, n-1)
			}
		case "batch":
			// 20 distinct keys: a handful of batches, each call either
			// coalesced or an item of one.
			if r.ToolExecuted < 1 || r.ToolExecuted > 5 || r.ToolBatches != r.ToolExecuted {
				t.Errorf("batch: tool_executed = %d, tool_batches = %d, want equal and within [1, 5]", r.ToolExecuted, r.ToolBatches)
			}
			if saved < n-r.ToolExecuted*20 {
				t.Errorf("batch: %d calls coalesced or cached, want at least %d", saved, n-r.ToolExecuted*20)
			}
		}
	}
	if diff := cmp.Diff([]string{"cache", "coalesce", "batch"}, modes); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("Run(dedup, -json) printed %d lines, want 3:\n%s", len(lines), out.String())
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		for _, key := range []string{"scenario", "mode", "n", "wall_s", "ok", "failed", "tool_requested", "tool_executed", "llm_calls", "peak_rss_mb", "cpu_s"} {
			if _, ok := got[key]; !ok {
				t.Errorf("line %d %q: no field %q", i, line, key)
			}
		}
	}
	t.Logf("\n%s", out.String())
}

func TestDedupModes(t *testing.T) {
	tests := []struct {
		name     string
		opt      bench.Options
		want     []string
		wantRuns int // Report.Runs of every report
		wantErr  string
	}{
		{name: "one mode", opt: bench.Options{N: 10, Modes: []string{"batch"}, JSON: true}, want: []string{"batch"}},
		{name: "counted", opt: bench.Options{N: 10, Modes: []string{"coalesce"}, Count: 2, JSON: true}, want: []string{"coalesce"}, wantRuns: 2},
		{name: "unknown mode", opt: bench.Options{Modes: []string{"engine"}}, wantErr: `bench: unknown mode "engine" for dedup (known: cache, coalesce, batch)`},
		{name: "negative n", opt: bench.Options{N: -1}, wantErr: "bench: -n and -count must be positive and -fail within [0, 1]"},
		{name: "negative count", opt: bench.Options{Count: -1}, wantErr: "bench: -n and -count must be positive and -fail within [0, 1]"},
		{name: "state", opt: bench.Options{State: true}, wantErr: "bench: -state does not apply to dedup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			reports, err := bench.Run(t.Context(), "dedup", tt.opt, &out)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Run(dedup) error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run(dedup) error = %v", err)
			}
			var modes []string
			for _, r := range reports {
				modes = append(modes, r.Mode)
				if r.Runs != tt.wantRuns || r.OK != tt.opt.N {
					t.Errorf("%s: runs %d, ok %d; want %d and %d", r.Mode, r.Runs, r.OK, tt.wantRuns, tt.opt.N)
				}
			}
			if diff := cmp.Diff(tt.want, modes); diff != "" {
				t.Errorf("modes (-want +got):\n%s", diff)
			}
		})
	}
}
