package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/bench"
)

// serveSim serves the HTTP simulator on a free loopback port for the
// test's lifetime and returns its address.
func serveSim(t *testing.T, cfg simhttp.Config) (string, *simhttp.Server) {
	t.Helper()
	srv, err := simhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	wg.Go(func() { _ = hs.Serve(ln) })
	t.Cleanup(func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
	})
	return ln.Addr().String(), srv
}

// fastSim is a simulator quick enough for tests: microseconds of prefill
// per token, a millisecond per decode step.
func fastSim(seqs, queue int) simhttp.Config {
	return simhttp.Config{Model: sim.Config{ToolTurns: -1, Seed: 7}, MaxSeqs: seqs, MaxQueue: queue,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond, DecodeStepPerSeq: 100 * time.Microsecond}
}

// liveFields are the keys every live line carries (BENCHMARKS.md).
var liveFields = []string{"scenario", "mode", "n", "wall_s", "ideal_s", "ratio", "agents_per_s", "ok", "failed",
	"tool_requested", "tool_executed", "llm_calls", "peak_rss_mb", "cpu_s",
	"ttft_p50_s", "ttft_p95_s", "cached_share", "http_429", "tokens_per_s", "schema_valid_share"}

// runLive runs the live scenario with JSON output and returns its lines,
// decoded both as reports and as raw objects (to check key names).
func runLive(t *testing.T, opt bench.Options) ([]bench.Report, []map[string]any) {
	t.Helper()
	opt.JSON = true
	var out bytes.Buffer
	reps, err := bench.Run(t.Context(), "live", opt, &out)
	if err != nil {
		t.Fatalf("Run(live) = %v", err)
	}
	var raws []map[string]any
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		raws = append(raws, m)
	}
	if len(raws) != len(reps) {
		t.Fatalf("%d JSON lines for %d reports:\n%s", len(raws), len(reps), out.String())
	}
	return reps, raws
}

// TestLiveAgainstHTTPSimulator runs bench live in both modes against the
// simulator served over HTTP, through the real OpenAI backend, and checks
// every field BENCHMARKS.md names and the values a sound run must have.
func TestLiveAgainstHTTPSimulator(t *testing.T) {
	addr, srv := serveSim(t, fastSim(8, -1))
	const n = 24
	reps, raws := runLive(t, bench.Options{Backend: "openai+http://" + addr + "/v1", Model: "sim", N: n})
	if len(reps) != 2 || reps[0].Mode != "engine" || reps[1].Mode != "naive" {
		t.Fatalf("modes = %+v, want engine then naive", reps)
	}
	var requests int64
	for i, r := range reps {
		for _, k := range liveFields {
			if _, ok := raws[i][k]; !ok {
				t.Errorf("%s: no %q in %v", r.Mode, k, raws[i])
			}
		}
		if r.Scenario != "live" || r.N != n || r.OK != n || r.Failed != 0 {
			t.Errorf("%s: scenario %q n %d ok %d failed %d, want live %d %d 0", r.Mode, r.Scenario, r.N, r.OK, r.Failed, n, n)
		}
		if r.LLMCalls < n || r.ServerRequests < r.LLMCalls {
			t.Errorf("%s: llm_calls %d server_requests %d, want >= %d and >= llm_calls", r.Mode, r.LLMCalls, r.ServerRequests, n)
		}
		if r.WallS <= 0 || r.IdealS <= 0 || r.Ratio <= 0 || r.AgentsPerS <= 0 {
			t.Errorf("%s: wall %v ideal %v ratio %v agents/s %v, want all > 0", r.Mode, r.WallS, r.IdealS, r.Ratio, r.AgentsPerS)
		}
		if r.IdealS > r.WallS {
			t.Errorf("%s: ideal_s %v > wall_s %v: one agent alone cannot be slower than %d", r.Mode, r.IdealS, r.WallS, n)
		}
		if *r.TTFTP50S <= 0 || *r.TTFTP95S < *r.TTFTP50S || *r.TTFTP95S > r.WallS {
			t.Errorf("%s: ttft p50 %v p95 %v wall %v, want 0 < p50 <= p95 <= wall", r.Mode, *r.TTFTP50S, *r.TTFTP95S, r.WallS)
		}
		if *r.HTTP429 != 0 {
			t.Errorf("%s: http_429 = %d from a server with an unbounded queue", r.Mode, *r.HTTP429)
		}
		if r.PromptTokens <= 0 || r.CompletionTokens <= 0 || r.MaxTokens != bench.DefaultLiveMaxTokens {
			t.Errorf("%s: prompt %d completion %d max_tokens %d", r.Mode, r.PromptTokens, r.CompletionTokens, r.MaxTokens)
		}
		// Every agent ended with a valid answer; the decode throughput is
		// the completion tokens over the wall time, as reported.
		if *r.SchemaValidShare != 1 {
			t.Errorf("%s: schema_valid_share = %v with %d of %d ok, want 1", r.Mode, *r.SchemaValidShare, r.OK, n)
		}
		if want := float64(r.CompletionTokens) / r.WallS; *r.TokensPerS <= 0 || math.Abs(*r.TokensPerS-want) > 0.01*want+0.01 {
			t.Errorf("%s: tokens_per_s = %v, want completion %d / wall %v = %.2f", r.Mode, *r.TokensPerS, r.CompletionTokens, r.WallS, want)
		}
		requests += r.ServerRequests
	}
	// The engine warms the shared prefix before the batch arrives: the
	// server's reported cached tokens show in cached_share.
	if s := *reps[0].CachedShare; s < 0.5 || s > 1 {
		t.Errorf("engine cached_share = %v, want within [0.5, 1]", s)
	}
	// Every request the clients counted reached the server, plus the
	// warm-up and solo runs of ideal_s.
	if got := srv.Stats().Requests; got != requests+4 {
		t.Errorf("server saw %d requests, clients counted %d + 4 solo", got, requests)
	}
}

// TestLiveCounts429 runs the naive client against a server that runs 2
// requests and queues 2: the others are answered 429, counted in
// http_429, and retried after a pause (some may fail when every retry is
// refused too: the naive client gives up after the engine's retry count).
func TestLiveCounts429(t *testing.T) {
	addr, srv := serveSim(t, fastSim(2, 2))
	const n = 12
	reps, _ := runLive(t, bench.Options{Backend: "sim+http://" + addr, N: n, Modes: []string{"naive"}, MaxTokens: 32})
	r := reps[0]
	st := srv.Stats()
	if st.Rejected == 0 || *r.HTTP429 != st.Rejected {
		t.Errorf("http_429 = %d, server rejected %d: want equal and > 0", *r.HTTP429, st.Rejected)
	}
	// The 4 solo runs of ideal_s are the other requests the server saw.
	if r.LLMCalls != st.Requests-4 || r.ServerRequests != r.LLMCalls {
		t.Errorf("llm_calls %d server_requests %d, server saw %d (4 solo)", r.LLMCalls, r.ServerRequests, st.Requests)
	}
	if r.OK == 0 || r.OK+r.Failed != n || r.MaxTokens != 32 {
		t.Errorf("ok %d failed %d max_tokens %d, want ok > 0, ok+failed = %d, 32", r.OK, r.Failed, r.MaxTokens, n)
	}
}

// TestLiveRefuses checks the options live refuses, and that an
// unreachable backend stops the scenario before any mode runs, naming the
// server by scheme and host only.
func TestLiveRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	tests := []struct {
		name     string
		scenario string
		opt      bench.Options
		want     string
	}{
		{"no backend", "live", bench.Options{}, "--backend URL is required"},
		{"not openai", "live", bench.Options{Backend: "anthropic://"}, "--backend"},
		{"bad mode", "live", bench.Options{Backend: "openai+http://" + dead + "/v1", Modes: []string{"fifo"}}, `unknown mode "fifo"`},
		{"fail", "live", bench.Options{Backend: "openai+http://" + dead + "/v1", Fail: 0.1}, "--fail, --state and --dir do not apply"},
		{"dir", "live", bench.Options{Backend: "openai+http://" + dead + "/v1", Dir: t.TempDir()}, "--fail, --state and --dir do not apply"},
		{"backend elsewhere", "fair", bench.Options{Backend: "openai+http://" + dead + "/v1"}, "live scenario only"},
		{"dead", "live", bench.Options{Backend: "openai+http://" + dead + "/v1?model=SECRET"}, "one agent alone against openai+http://" + dead + ":"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := bench.Run(t.Context(), tt.scenario, tt.opt, &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run(%s) = %v, want an error containing %q", tt.scenario, err, tt.want)
			}
			if strings.Contains(err.Error(), "SECRET") || out.Len() != 0 {
				t.Errorf("error %q, output %q: want no URL path and no output", err, out.String())
			}
		})
	}
}
