package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestCachedCallsKeptThroughResume: an agent whose first call was
// answered from the cache, stopped at its second (paid) call and resumed,
// reports the cached call of the run it was stopped in.
func TestCachedCallsKeptThroughResume(t *testing.T) {
	var (
		stop    atomic.Pointer[context.CancelFunc] // set: the next backend request stops the run
		stopped atomic.Int64
	)
	addr, srv := startWrappedSimServer(t, simhttp.Config{Model: sim.Config{Seed: 7, ToolTurns: 2}, MaxSeqs: 64,
		PrefillPerToken: time.Nanosecond, DecodeStep: time.Microsecond}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cancel := stop.Load(); cancel != nil {
				stopped.Add(1)
				(*cancel)()
				http.Error(w, "stopped", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	const n = 3
	dir, job := cacheJob(t, addr, n)
	out := filepath.Join(dir, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", job, "--out", out); code != 0 {
		t.Fatalf("first run: exit %d, stderr:\n%s", code, stderr)
	}
	if got := srv.Stats().Requests; got != 3*n {
		t.Fatalf("first run: backend got %d requests, want %d (3 calls per agent)", got, 3*n)
	}

	// Each agent's file changes: its first call (the first tool call) is
	// still cached, its second (after the new text) is not. The run
	// started afresh stops at the first call that reaches the backend.
	for i := range n {
		writeFile(t, filepath.Join(dir, "files"), fmt.Sprintf("f%d.txt", i), fmt.Sprintf("version 2 of file %d\n", i))
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop.Store(&cancel)
	code, _, stderr := run(t, ctx, "run", job, "--out", out, "--restart")
	stop.Store(nil)
	if stopped.Load() == 0 {
		t.Fatalf("the second run never reached the backend: exit %d, stderr:\n%s", code, stderr)
	}

	before := srv.Stats().Requests
	if code, _, stderr := run(t, t.Context(), "run", job, "--out", out); code != 0 {
		t.Fatalf("resumed run: exit %d, stderr:\n%s", code, stderr)
	}
	if got := srv.Stats().Requests - before; got != 2*n {
		t.Errorf("resumed run: backend got %d requests, want %d (the two calls after the changed file, per agent)", got, 2*n)
	}
	lines := readCacheLines(t, out)
	if len(lines) != n {
		t.Fatalf("%d result lines, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l.CachedCalls != 1 || l.SavedTokens <= 0 || l.ModelCalls != 3 {
			t.Errorf("line %d: cached_calls %d, saved_tokens %d, model_calls %d; want 1 cached call (of the stopped run), tokens saved, 3 model calls",
				i, l.CachedCalls, l.SavedTokens, l.ModelCalls)
		}
	}
}
