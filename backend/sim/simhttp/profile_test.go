package simhttp_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestProfile checks the named profiles' settings and that an unknown
// name is an error listing the known ones.
func TestProfile(t *testing.T) {
	t.Parallel()
	for _, name := range simhttp.Profiles {
		cfg, err := simhttp.Profile(name)
		if err != nil {
			t.Fatalf("Profile(%q) = %v", name, err)
		}
		if _, err := simhttp.New(cfg); err != nil {
			t.Errorf("New(Profile(%q)) = %v, want a valid config", name, err)
		}
	}
	one, _ := simhttp.Profile(simhttp.ProfileOneSlot)
	if one.MaxSeqs != 1 || !one.NoPrefixCache || one.CallOverhead != simhttp.OneSlotCallOverhead {
		t.Errorf("one-slot = %+v, want 1 sequence, no prefix cache, %v a call", one, simhttp.OneSlotCallOverhead)
	}
	cached, _ := simhttp.Profile(simhttp.ProfileCachedSlots)
	if cached.MaxSeqs != simhttp.DefaultMaxSeqs || cached.NoPrefixCache || cached.CallOverhead != 0 || cached.RPM != 0 {
		t.Errorf("cached-slots = %+v, want the default server", cached)
	}
	rpm, _ := simhttp.Profile(simhttp.ProfileRPMLimited)
	if rpm.RPM != simhttp.RateLimitedRPM || rpm.TPM != simhttp.RateLimitedTPM {
		t.Errorf("rpm-limited = %+v, want RPM %d and TPM %d", rpm, simhttp.RateLimitedRPM, simhttp.RateLimitedTPM)
	}
	_, err := simhttp.Profile("vllm")
	if err == nil || !strings.Contains(err.Error(), `"vllm"`) {
		t.Fatalf(`Profile("vllm") = %v, want an error naming it`, err)
	}
	for _, name := range simhttp.Profiles {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not list %q", err, name)
		}
	}
}

// TestServerPackSizes checks that the server counts requests by the
// tasks they carry, and that a request over the rate limit is not
// counted.
func TestServerPackSizes(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.Model = sim.Config{Seed: 4, ToolTurns: -1}
	cfg.RPM = 4
	ts := startServer(t, cfg)
	tasks := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("Issue %d of %d.", i, n)
		}
		return out
	}
	b3, _ := packed(tasks(3))
	b5, _ := packed(tasks(5))
	complete(t, ts, b3)
	complete(t, ts, b5)
	complete(t, ts, b5)
	complete(t, ts, request("You triage issues.", "Issue 9."))
	resp := ts.post(t, t.Context(), b3) // the fifth request: over RPM 4
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fifth request: status %d, want 429", resp.StatusCode)
	}
	want := map[int]int64{1: 1, 3: 1, 5: 2}
	if got := ts.PackSizes(); !maps.Equal(got, want) {
		t.Errorf("PackSizes = %v, want %v", got, want)
	}
	if st := ts.ModelStats(); st.Packed < 3 {
		t.Errorf("ModelStats().Packed = %d, want at least the 3 packed answers", st.Packed)
	}
}
