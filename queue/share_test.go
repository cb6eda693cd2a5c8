package queue_test

import (
	"context"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/queue"
)

// TestShareLimits shares a job's max_inflight and rpm for its own model
// only: another model (a fallback tier) keeps per-process limits, and the
// slot limits made are closed with the SharedLimits.
func TestShareLimits(t *testing.T) {
	c, _ := open(t)
	own, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := batchagent.Config{}
	cfg.Admission.MaxInflight = 4
	cfg.Admission.RateLimit.RPM = 600
	limits := c.ShareLimits(&cfg, queue.ShareConfig{Addr: "sim://", Model: own})
	defer limits.Close()
	if s, err := cfg.Admission.SharedInflight(batchagent.Backend{Name: "b", Model: own}); err != nil || s == nil {
		t.Fatalf("SharedInflight(own model) = %v, %v; want a limit", s, err)
	}
	if s, err := cfg.Admission.SharedInflight(batchagent.Backend{Name: "f", Model: other}); err != nil || s != nil {
		t.Errorf("SharedInflight(other model) = %v, %v; want none", s, err)
	}
	sr, err := cfg.Admission.RateLimit.Shared(batchagent.Backend{Name: "b", Model: own})
	if err != nil || sr == nil {
		t.Fatalf("RateLimit.Shared(own model) = %v, %v; want a limit", sr, err)
	}
	if err := sr.Wait(context.Background(), 1); err != nil {
		t.Errorf("Wait = %v", err)
	}
	if s, err := cfg.Admission.RateLimit.Shared(batchagent.Backend{Name: "f", Model: other}); err != nil || s != nil {
		t.Errorf("RateLimit.Shared(other model) = %v, %v; want none", s, err)
	}
}
