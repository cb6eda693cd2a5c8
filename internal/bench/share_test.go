package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestSubmitAndShareReport runs both scenarios small and checks every
// result is counted and each JSON line carries the fields BENCHMARKS.md
// names.
func TestSubmitAndShareReport(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		n, total int
		fields   []string
	}{
		{"submit", 300, 300 + 1000, []string{"submit_p50_us", "submit_p99_us", "in_flight"}},
		{"share", 40, 2*40 + 50, []string{"job_a_wall_s", "job_b_wall_s", "job_gap", "interactive_wait_p50_s", "interactive_wait_p95_s", "slot_turnover_s"}},
	} {
		var out bytes.Buffer
		reports, err := bench.Run(t.Context(), tc.scenario, bench.Options{N: tc.n, JSON: true}, &out)
		if err != nil {
			t.Fatalf("Run(%s) = %v", tc.scenario, err)
		}
		if len(reports) != 1 || reports[0].OK != tc.total || reports[0].Failed != 0 || reports[0].N != tc.total {
			t.Fatalf("%s: reports %+v, want one with %d ok", tc.scenario, reports, tc.total)
		}
		var line map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &line); err != nil {
			t.Fatalf("%s: output %q: %v", tc.scenario, out.String(), err)
		}
		for _, f := range tc.fields {
			if _, ok := line[f].(float64); !ok {
				t.Errorf("%s: field %q missing or not a number in %s", tc.scenario, f, strings.TrimSpace(out.String()))
			}
		}
	}
	if _, err := bench.Run(t.Context(), "share", bench.Options{Fail: 0.1}, &bytes.Buffer{}); err == nil {
		t.Error("share with --fail: no error; want the flags it takes named")
	}
}
