package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/bench"
)

// runPackProfile runs modes of the pack scenario on profile with n tasks
// and returns the reports by mode, checking the JSON lines' keys.
func runPackProfile(t *testing.T, profile string, n int, bias float64, modes ...string) map[string]bench.PackReport {
	t.Helper()
	var out bytes.Buffer
	reps, err := bench.RunPack(t.Context(), bench.PackOptions{N: n, Profile: profile, Modes: modes, PositionBias: bias, JSON: true}, &out)
	if err != nil {
		t.Fatalf("RunPack(%s): %v", profile, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(modes) || len(reps) != len(modes) {
		t.Fatalf("%d lines, %d reports, want one per mode %v:\n%s", len(lines), len(reps), modes, out.String())
	}
	by := map[string]bench.PackReport{}
	for i, line := range lines {
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		for _, k := range []string{"profile", "mode", "wall_s", "llm_calls", "ok", "failed", "pack_sizes"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("line %q lacks %q", line, k)
			}
		}
		r := reps[i]
		if r.Profile != profile || r.Mode != modes[i] {
			t.Errorf("report %d: profile %q, mode %q, want %q, %q", i, r.Profile, r.Mode, profile, modes[i])
		}
		if r.OK != n || r.Failed != 0 {
			t.Errorf("%s %s: ok %d, failed %d, want every one of %d inputs valid", profile, r.Mode, r.OK, r.Failed, n)
		}
		by[r.Mode] = r
	}
	return by
}

// TestPackProfileOneSlot: on one slot without a prefix cache and with a
// per-call overhead, packs of 10 finish before separate calls, and the
// server saw packs of 10.
func TestPackProfileOneSlot(t *testing.T) {
	by := runPackProfile(t, "one-slot", 10, 0, "unpacked", "fixed-10")
	u, p := by["unpacked"], by["fixed-10"]
	if p.WallS >= u.WallS {
		t.Errorf("one-slot: packed 10 wall %.2fs, unpacked %.2fs, want packed faster", p.WallS, u.WallS)
	}
	if u.PackSizes["1"] != 10 || p.PackSizes["10"] != 1 || p.LLMCalls != 1 {
		t.Errorf("pack sizes unpacked %v, packed %v (%d calls), want 10 alone, then one pack of 10", u.PackSizes, p.PackSizes, p.LLMCalls)
	}
	if p.WallRatio == nil || *p.WallRatio >= 1 {
		t.Errorf("packed wall ratio %v, want < 1", p.WallRatio)
	}
}

// TestPackProfileCachedSlots: on 16 slots with a prefix cache, separate
// calls decode side by side and finish before packs of 20, whose answers
// decode one after the other; auto's line carries a speedup.
func TestPackProfileCachedSlots(t *testing.T) {
	by := runPackProfile(t, "cached-slots", 40, 0, "unpacked", "auto", "fixed-20")
	u, p := by["unpacked"], by["fixed-20"]
	if u.WallS >= p.WallS {
		t.Errorf("cached-slots: unpacked wall %.2fs, packed 20 %.2fs, want unpacked faster", u.WallS, p.WallS)
	}
	if u.CachedShare < 0.5 {
		t.Errorf("cached-slots: unpacked cached share %.2f, want most of the prompt cached", u.CachedShare)
	}
	a := by["auto"]
	if a.Speedup == nil || *a.Speedup <= 0 || u.Speedup != nil || p.Speedup != nil {
		t.Errorf("speedup: auto %v, unpacked %v, fixed-20 %v, want it on the auto line only", a.Speedup, u.Speedup, p.Speedup)
	}
}

// TestPackProfileRPMLimited: at 600 requests a minute, separate calls
// are paced (or refused) by the limit while eight packs of 5 go at once.
// (Two packs of 20 would decode 20 answers each in sequence, longer than
// pacing 40 calls: the gain grows with the tasks beyond the limit.)
func TestPackProfileRPMLimited(t *testing.T) {
	by := runPackProfile(t, "rpm-limited", 40, 0, "unpacked", "fixed-5")
	u, p := by["unpacked"], by["fixed-5"]
	// 40 requests at 10 a second take about 4 s, unless 429s refused some.
	if u.WallS < 2 && u.HTTP429 == 0 {
		t.Errorf("rpm-limited: unpacked wall %.2fs with no 429, want it paced by the limit", u.WallS)
	}
	if p.WallS >= u.WallS || p.LLMCalls != 8 {
		t.Errorf("rpm-limited: packed 5 wall %.2fs in %d calls, unpacked %.2fs, want 8 calls and faster", p.WallS, p.LLMCalls, u.WallS)
	}
}

// TestPackPositionBias: a position bias makes packed entries wrong yet
// valid, so every input still ends valid, and the line counts them.
func TestPackPositionBias(t *testing.T) {
	by := runPackProfile(t, "one-slot", 20, 0.5, "unpacked", "fixed-20")
	if u := by["unpacked"]; u.Biased != 0 {
		t.Errorf("unpacked: %d biased entries, want 0 (bias applies to packs)", u.Biased)
	}
	if p := by["fixed-20"]; p.Biased == 0 || p.PositionBias != 0.5 {
		t.Errorf("fixed-20: %d biased entries at bias %v, want some at 0.5", p.Biased, p.PositionBias)
	}
}

// TestPackProfileErrors: an unknown profile or mode is an error naming
// it and the known ones.
func TestPackProfileErrors(t *testing.T) {
	var out bytes.Buffer
	_, err := bench.RunPack(t.Context(), bench.PackOptions{N: 1, Profile: "vllm"}, &out)
	if err == nil || !strings.Contains(err.Error(), `"vllm"`) || !strings.Contains(err.Error(), "one-slot") {
		t.Errorf("profile vllm: %v, want an error naming it and the known profiles", err)
	}
	_, err = bench.RunPack(t.Context(), bench.PackOptions{N: 1, Profile: "one-slot", Modes: []string{"fixed-7"}}, &out)
	if err == nil || !strings.Contains(err.Error(), `"fixed-7"`) || !strings.Contains(err.Error(), "fixed-10") {
		t.Errorf("mode fixed-7: %v, want an error naming it and the known modes", err)
	}
	_, err = bench.RunPack(t.Context(), bench.PackOptions{N: 1, PositionBias: 2}, &out)
	if err == nil || !strings.Contains(err.Error(), "position-bias") {
		t.Errorf("position bias 2: %v, want an error naming --position-bias", err)
	}
}
