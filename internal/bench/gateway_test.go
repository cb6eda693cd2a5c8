package bench_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestGateway runs the gateway scenario small and checks its report.
func TestGateway(t *testing.T) {
	var out bytes.Buffer
	rep, err := bench.RunGateway(t.Context(), bench.GatewayOptions{Rate: 200, Duration: time.Second, JSON: true}, &out)
	if err != nil {
		t.Fatalf("RunGateway: %v", err)
	}
	if rep.Requests != 200 || rep.DirectErrors != 0 || rep.GatewayErrors != 0 {
		t.Errorf("report %+v, want 200 requests and no errors", rep)
	}
	if rep.GatewayP50MS <= 0 || rep.DirectP50MS <= 0 || rep.GatewayP99MS < rep.GatewayP50MS {
		t.Errorf("latencies %+v, want positive and ordered", rep)
	}
	var fields map[string]any
	if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	for _, k := range []string{"scenario", "rate", "added_p50_ms", "added_p95_ms", "added_p99_ms", "gateway_errors", "achieved_rate"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON report lacks %q: %s", k, out.String())
		}
	}
	t.Logf("%s", out.String())
}
