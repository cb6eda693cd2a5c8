package batchagent_test

import (
	"errors"
	"math"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
)

// TestFingerprintSampling checks that a run resumed with other sampling
// settings is a changed job, while a job without them keeps the
// fingerprint that earlier versions recorded (no "sampling" part).
func TestFingerprintSampling(t *testing.T) {
	t.Parallel()
	base := batchagent.Def{Model: newSim(t, sim.Config{}), System: "s", Task: "t {x}", ModelName: "m"}
	plain := mustSpec(t, base).Fingerprint()
	if _, ok := plain["sampling"]; ok || len(plain) != 5 {
		t.Fatalf("Fingerprint() of a job without sampling settings = %v, want the 5 parts of earlier versions", plain)
	}
	hot, cold := base, base
	hot.Temperature, cold.Temperature = new(1.0), new(0.0)
	seeded := base
	seeded.Seed = new(int64(7))
	stopped := base
	stopped.Stop = []string{"END"}
	seen := map[string]string{"none": ""}
	for name, d := range map[string]batchagent.Def{"hot": hot, "cold": cold, "seeded": seeded, "stopped": stopped} {
		fp := mustSpec(t, d).Fingerprint()
		s := fp["sampling"]
		if s == "" {
			t.Errorf("%s: Fingerprint() has no sampling part: %v", name, fp)
		}
		for other, v := range seen {
			if v == s {
				t.Errorf("%s and %s have the same sampling part %q", name, other, s)
			}
		}
		seen[name] = s
		for k, v := range plain {
			if fp[k] != v {
				t.Errorf("%s: part %q = %q, want %q (unchanged)", name, k, fp[k], v)
			}
		}
	}
}

// TestNewSpecRefusesBadSampling checks the sampling settings NewSpec
// refuses.
func TestNewSpecRefusesBadSampling(t *testing.T) {
	t.Parallel()
	model, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]batchagent.Def{
		"NaN temperature":      {Temperature: new(math.NaN())},
		"negative temperature": {Temperature: new(-1.0)},
		"top_p above 1":        {TopP: new(1.5)},
	} {
		d.Model, d.Task = model, "t"
		if _, err := batchagent.NewSpec(d); !errors.Is(err, batchagent.ErrBadJob) {
			t.Errorf("%s: NewSpec() error = %v, want ErrBadJob", name, err)
		}
	}
}
