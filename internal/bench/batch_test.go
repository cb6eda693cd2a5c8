package bench_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestBatch runs the batch scenario small and checks its report.
func TestBatch(t *testing.T) {
	var out bytes.Buffer
	rep, err := bench.RunBatch(t.Context(), bench.BatchOptions{N: 300, Dir: t.TempDir(), JSON: true}, &out)
	if err != nil {
		t.Fatalf("RunBatch: %v", err)
	}
	if rep.N != 300 || rep.OK != 300 || rep.Failed != 0 || rep.OutputLines != 300 || rep.LinesPerS <= 0 || rep.WallS <= 0 {
		t.Errorf("report %+v, want 300 lines done and output", rep)
	}
	var fields map[string]any
	if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	for _, k := range []string{"scenario", "mode", "n", "wall_s", "lines_per_s", "peak_rss_mb", "cpu_s"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON report lacks %q: %s", k, out.String())
		}
	}
}
