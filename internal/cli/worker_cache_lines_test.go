package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/redistest"
)

// TestWorkerLinesCountCachedCalls: the result lines of a run over Redis
// say how many of their model calls the (Redis) response cache answered:
// none in a first run, every one when the same job runs again into a new
// output, with the tokens they saved, and the server sees no call of the
// second run.
func TestWorkerLinesCountCachedCalls(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	model, addr := startModelServer(t, 1)
	dir := t.TempDir()
	job, in := scaleJob(t, dir, addr, 20, "")
	appendTo(t, job, "cache: {ttl: 1h}\n") // the simulator's answers are cached only when the job says so
	for _, id := range []string{"w1", "w2"} {
		startProc(t, dir, id, "worker", "--redis", rs.URL, "--id", id, "--max-active", "8")
	}
	for i, out := range []string{"first.jsonl", "second.jsonl"} {
		coord := startProc(t, dir, "coordinator-"+out, "run", job, "--inputs", in, "--out", out, "--redis", rs.URL, "--quiet")
		if code := coord.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("run into %s: exit %d; stderr:\n%s", out, code, coord.stderr.String())
		}
		lines := readCacheLines(t, filepath.Join(dir, out))
		if len(lines) != 20 {
			t.Fatalf("%s: %d lines, want 20", out, len(lines))
		}
		for idx, l := range lines {
			want := 0
			if i == 1 {
				want = l.ModelCalls
			}
			if l.ModelCalls != 2 || l.CachedCalls != want || (want > 0) != (l.SavedTokens > 0) {
				t.Errorf("%s line %d: model_calls %d, cached_calls %d, saved_tokens %d; want 2 model calls, %d cached", out, idx, l.ModelCalls, l.CachedCalls, l.SavedTokens, want)
			}
		}
		if calls := model.Stats().Requests; calls != 40 {
			t.Errorf("after the run into %s the server saw %d model calls, want 40: the first run's only", out, calls)
		}
	}
}

// TestRunOverRedisWarnsUnknownPrice: the coordinator of a run over Redis
// says once that the job's model has no known price.
func TestRunOverRedisWarnsUnknownPrice(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	_, addr := startModelServer(t, 0)
	dir := t.TempDir()
	job, in := scaleJob(t, dir, addr, 3, "")
	appendTo(t, job, "model: coord-unpriced-model\n")
	startProc(t, dir, "w1", "worker", "--redis", rs.URL, "--id", "w1")
	coord := startProc(t, dir, "coordinator", "run", job, "--inputs", in, "--out", "out.jsonl", "--redis", rs.URL, "--quiet")
	if code := coord.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, coord.stderr.String())
	}
	stderr := coord.stderr.String()
	if n := strings.Count(stderr, "no known price for model"); n != 1 || !strings.Contains(stderr, "model=coord-unpriced-model") {
		t.Errorf("coordinator's stderr warns of the unknown price %d times, want once, naming the model:\n%s", n, stderr)
	}
}
