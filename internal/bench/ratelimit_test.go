package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestRatelimitScenario runs a short ratelimit scenario: every agent ok,
// no 429 after the first answer, the limits learnt from the headers, and
// the JSON line carries the fields BENCHMARKS.md names.
func TestRatelimitScenario(t *testing.T) {
	var out bytes.Buffer
	reports, err := bench.RunRatelimit(context.Background(), bench.RatelimitOptions{N: 40, JSON: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	r := reports[0]
	if r.OK != 40 || r.Failed != 0 || r.HTTP429 != 0 || r.Workers != 1 {
		t.Errorf("report %+v, want 40 ok, 0 failed, 0 429s after the first answer, workers 1", r)
	}
	if r.LearntRPM != bench.RatelimitRPM || r.LearntTPM != bench.RatelimitTPM {
		t.Errorf("learnt %d rpm, %d tpm; want %d, %d", r.LearntRPM, r.LearntTPM, bench.RatelimitRPM, bench.RatelimitTPM)
	}
	// Paced: not above the limit (with slack for the calls sent before it
	// was known), whatever the machine's speed.
	if r.LimitShare <= 0 || r.LimitShare > 1.3 {
		t.Errorf("limit_share %v, want in (0, 1.3]", r.LimitShare)
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	for _, k := range []string{"scenario", "workers", "http_429", "limit_share", "ok", "failed"} {
		if _, ok := line[k]; !ok {
			t.Errorf("JSON line %s lacks %q", out.String(), k)
		}
	}
}
