package bench_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestScaleWithState runs the scale scenario small, with the checkpoint
// store on: every mode finishes every agent, and the engine+state report
// carries its share of the engine's throughput.
func TestScaleWithState(t *testing.T) {
	const n = 2000
	var out bytes.Buffer
	// engine+state named in -mode and -state at once runs it once.
	reports, err := bench.Run(t.Context(), "scale", bench.Options{N: n, JSON: true, State: true,
		Modes: []string{"engine", "engine+state"}}, &out)
	if err != nil {
		t.Fatalf("Run(scale) error = %v", err)
	}
	var modes []string
	for _, r := range reports {
		modes = append(modes, r.Mode)
		if r.OK != n || r.Failed != 0 || r.LLMCalls != n {
			t.Errorf("%s: ok %d, failed %d, llm_calls %d; want %d, 0, %d", r.Mode, r.OK, r.Failed, r.LLMCalls, n, n)
		}
		switch {
		case r.Mode == "engine+state" && (r.StateShare == nil || *r.StateShare <= 0):
			t.Errorf("engine+state: state_share = %v, want a positive share", r.StateShare)
		case r.Mode != "engine+state" && r.StateShare != nil:
			t.Errorf("%s: state_share = %v, want none", r.Mode, *r.StateShare)
		}
	}
	if strings.Join(modes, ",") != "engine,engine+state" {
		t.Errorf("modes = %v, want engine then engine+state, once each", modes)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("output has %d lines, want 2:\n%s", len(lines), out.String())
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &last); err != nil || last["state_share"] == nil {
		t.Errorf("last line %s: %v, want JSON with state_share", lines[1], err)
	}

	if _, err := bench.Run(t.Context(), "scale", bench.Options{N: 10, Modes: []string{"fast"}}, &out); err == nil ||
		!strings.Contains(err.Error(), "engine+state") {
		t.Errorf("Run(mode fast) = %v, want an error listing the known modes", err)
	}
}

// TestCount runs each mode three times and reports each once, its run of
// median throughput, with the number of runs.
func TestCount(t *testing.T) {
	var out bytes.Buffer
	reports, err := bench.Run(t.Context(), "scale", bench.Options{N: 300, JSON: true, State: true, Count: 3,
		Modes: []string{"engine"}}, &out)
	if err != nil {
		t.Fatalf("Run(scale, count 3) error = %v", err)
	}
	if len(reports) != 2 || reports[0].Mode != "engine" || reports[1].Mode != "engine+state" {
		t.Fatalf("reports = %+v, want one engine and one engine+state", reports)
	}
	for _, r := range reports {
		if r.Runs != 3 || r.OK != 300 {
			t.Errorf("%s: runs %d, ok %d; want 3 and 300", r.Mode, r.Runs, r.OK)
		}
	}
	if got := strings.Count(out.String(), "\n"); got != 2 {
		t.Errorf("output has %d lines, want 2", got)
	}
	if _, err := bench.Run(t.Context(), "scale", bench.Options{N: 10, Count: -1}, &out); err == nil {
		t.Error("Run(count -1) = nil error, want one")
	}
}

// BenchmarkScaleEngine runs the scale scenario's engine mode on 30,000
// single-call agents: with -benchmem, B/op and allocs/op over 30,000 are
// what the engine, the agent and the validation of its answer allocate
// per agent, the memory that drives the GC work of bench scale.
func BenchmarkScaleEngine(b *testing.B) {
	const n = 30_000
	for b.Loop() {
		reports, err := bench.Run(b.Context(), "scale", bench.Options{N: n, Modes: []string{"engine"}}, io.Discard)
		if err != nil {
			b.Fatalf("Run(scale) error = %v", err)
		}
		if r := reports[0]; r.OK != n {
			b.Fatalf("ok %d of %d agents", r.OK, n)
		}
	}
}

// TestPairedShare: the state share is the median of the per-round ratios,
// so a round where the machine ran slower for both modes does not count
// one mode's slow run against the other's fast one.
func TestPairedShare(t *testing.T) {
	runs := func(aps ...float64) []bench.Report {
		r := make([]bench.Report, len(aps))
		for i, v := range aps {
			r[i].AgentsPerS = v
		}
		return r
	}
	tests := []struct {
		name         string
		state, engin []bench.Report
		want         float64
		ok           bool
	}{
		// Medians of each mode (130 / 200) would give 0.65.
		{"drift", runs(90, 180, 130), runs(100, 200, 300), 0.9, true},
		{"one round", runs(81), runs(100), 0.81, true},
		{"even count takes the lower", runs(70, 90), runs(100, 100), 0.7, true},
		{"no engine throughput", runs(90), runs(0), 0, false},
		{"no rounds", nil, nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := bench.PairedShare(tt.state, tt.engin)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: PairedShare = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
