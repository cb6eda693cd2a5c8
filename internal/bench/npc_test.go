package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// TestNPC runs the npc scenario small: every plan is answered in both
// modes, the healthy primary answers some, and once the primary dies the
// smaller model answers the rest, with the breaker opened.
func TestNPC(t *testing.T) {
	var out bytes.Buffer
	reps, err := bench.RunNPC(t.Context(), bench.NPCOptions{N: 60, JSON: true}, &out)
	if err != nil {
		t.Fatalf("RunNPC: %v", err)
	}
	if len(reps) != 2 || reps[0].Mode != "healthy" || reps[1].Mode != "primary_dies" {
		t.Fatalf("reports %+v, want healthy then primary_dies", reps)
	}
	for _, r := range reps {
		sum := 0
		for _, n := range r.TierCounts {
			sum += n
		}
		if sum != 60 || r.Failed != 0 || r.Frames == 0 || r.FrameP99MS <= 0 {
			t.Errorf("%s: %+v, want 60 plans by tier, none failed, frames timed", r.Mode, r)
		}
	}
	if reps[0].TierCounts["0"] == 0 {
		t.Errorf("healthy: tiers %v, want the primary to answer some", reps[0].TierCounts)
	}
	if d := reps[1]; d.TierCounts["1"] == 0 || d.BreakerChanges == 0 {
		t.Errorf("primary_dies: tiers %v, breaker changes %d; want the fallback model to answer and the breaker to open", d.TierCounts, d.BreakerChanges)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("output %q, want 2 JSON lines", out.String())
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["frame_p99_ms"] == nil || v["tier_counts"] == nil {
			t.Errorf("line %s: %v; want frame_p99_ms and tier_counts", l, err)
		}
	}
}
