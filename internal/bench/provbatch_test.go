package bench_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// buildBatchagent builds the batchagent command into a temporary
// directory and returns its path: the scenarios that run `batchagent
// run` as a process need the binary.
func buildBatchagent(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "batchagent")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "github.com/batchagent/batchagent/cmd/batchagent").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// TestProviderBatchScenario runs a small provider-batch scenario, killed
// at the endpoint's 2nd batch and resumed: every agent ok after three
// rounds, the cost about half the real-time run's, no call submitted
// twice, and the JSON line carries the fields BENCHMARKS.md names.
func TestProviderBatchScenario(t *testing.T) {
	exe := buildBatchagent(t)
	const n = 40
	var out bytes.Buffer
	r, err := bench.RunProviderBatch(t.Context(), exe, bench.ProviderBatchOptions{N: n, KillAt: 2, Dir: t.TempDir(), JSON: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != n || r.Failed != 0 {
		t.Errorf("ok %d, failed %d; want %d ok", r.OK, r.Failed, n)
	}
	if r.CostRatio <= 0 || r.CostRatio > 0.52 || r.Cost <= 0 {
		t.Errorf("cost %v against %v in real time: ratio %v, want in (0, 0.52]", r.Cost, r.RealtimeCost, r.CostRatio)
	}
	if r.DuplicateSubmissions != 0 || r.Lines != 3*n {
		t.Errorf("%d duplicate submissions, %d lines; want none twice, %d lines", r.DuplicateSubmissions, r.Lines, 3*n)
	}
	if r.Rounds != 3 || r.Submissions < 3 || r.KillAt != 2 {
		t.Errorf("rounds %d, submissions %d, kill_at %d; want 3 rounds in 3 or more submissions, killed at 2", r.Rounds, r.Submissions, r.KillAt)
	}
	t.Logf("%s", bytes.TrimSpace(out.Bytes()))
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	for _, k := range []string{"scenario", "ok", "failed", "cost_ratio", "submissions", "rounds", "duplicate_submissions"} {
		if _, ok := line[k]; !ok {
			t.Errorf("JSON line %s lacks %q", out.String(), k)
		}
	}
}
