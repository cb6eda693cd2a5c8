package batchagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
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

// TestFingerprintIgnoresNotIdempotent: a tool's NotIdempotent changes when
// its calls run, not what they return, so a run checkpointed before the
// field existed (or before an MCP server annotated its tools) resumes.
func TestFingerprintIgnoresNotIdempotent(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	spec := tool.Spec{Name: "send", Description: "Sends.", Parameters: json.RawMessage(`{"type":"object"}`)}
	plain := batchagent.Def{Model: newSim(t, sim.Config{}), Task: "t", Tools: []tool.Tool{tool.Func(spec, fn)}}
	spec.NotIdempotent = true
	marked := plain
	marked.Tools = []tool.Tool{tool.Func(spec, fn)}
	if a, b := mustSpec(t, plain).Fingerprint(), mustSpec(t, marked).Fingerprint(); a["tools"] != b["tools"] {
		t.Errorf("tools part %q with NotIdempotent, %q without; want them equal", b["tools"], a["tools"])
	}
	spec.Description = "Sends mail."
	other := plain
	other.Tools = []tool.Tool{tool.Func(spec, fn)}
	if a, b := mustSpec(t, plain).Fingerprint(), mustSpec(t, other).Fingerprint(); a["tools"] == b["tools"] {
		t.Errorf("tools part %q unchanged by another description; want it changed", a["tools"])
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
