package batchagent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/google/go-cmp/cmp"
)

// TestBudgetExpiryNeverOpensBreaker: a primary slower than the budget and
// a healthy fallback model slower than its share of the budget (a quarter
// of it, once the budget is spent) are cut by the budget on every agent.
// That is no backend failure: no breaker opens, every agent tries the
// fallback model (none is "circuit breaker open"), and the func tier
// answers. Stats.ByTier counts the answers, by the tier that gave them.
func TestBudgetExpiryNeverOpensBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		e := newEngine(t, batchagent.Config{MaxActive: 1, Breaker: batchagent.Breaker{Failures: 2, Cooldown: time.Hour}})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Second}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
			Budget: 200 * time.Millisecond,
			Fallbacks: []batchagent.Fallback{
				{Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond}), ModelName: "small"},
				{Func: heuristic(&calls)},
			},
		}), batchagent.Slice(inputs(8)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.Tier != 2 {
				t.Errorf("result %d: tier %d err %v, want tier 2's answer", r.Index, r.Tier, r.Err)
			}
			tried := false
			for _, sp := range r.Spans {
				tried = tried || sp.Tier == 1
			}
			if !tried {
				t.Errorf("result %d spans %+v: tier 1 was skipped, want it tried", r.Index, r.Spans)
			}
		}
		s := e.Stats()
		if s.BreakerChanges != 0 {
			t.Errorf("breaker changes %d, want 0: a budget that ran out is no backend failure", s.BreakerChanges)
		}
		if diff := cmp.Diff(map[int]int64{2: 8}, s.ByTier); diff != "" {
			t.Errorf("by tier (-want +got):\n%s", diff)
		}
	})
}

// TestByTierCountsAnswers: with no tier able to answer within the budget,
// every result fails; none is counted as answered by a tier.
func TestByTierCountsAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, batchagent.Config{})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: newSim(t, sim.Config{Latency: 10 * time.Second}), Task: "{id}", OutputSchema: json.RawMessage(outSchema),
			Budget:    200 * time.Millisecond,
			Fallbacks: []batchagent.Fallback{{Model: newSim(t, sim.Config{Latency: 100 * time.Millisecond}), ModelName: "small"}},
		}), batchagent.Slice(inputs(4)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if batchagent.KindOf(r.Err) != batchagent.KindTimeout || strings.Contains(r.Err.Error(), "circuit breaker") {
				t.Errorf("result %d: %v, want a timeout of the budget", r.Index, r.Err)
			}
		}
		if s := e.Stats(); len(s.ByTier) != 0 || s.Failed != 4 {
			t.Errorf("by tier %v, failed %d; want {} and 4: a failure is no answer", s.ByTier, s.Failed)
		}
	})
}

// TestBudgetBelowMinimumRefused: a budget no model call could meet is
// refused when the spec is built, naming the minimum.
func TestBudgetBelowMinimumRefused(t *testing.T) {
	_, err := batchagent.NewSpec(batchagent.Def{
		Model: newSim(t, sim.Config{}), Task: "{id}", Budget: time.Millisecond,
		Fallbacks: []batchagent.Fallback{{Func: heuristic(new(atomic.Int64))}},
	})
	if !errors.Is(err, batchagent.ErrBadJob) || !strings.Contains(err.Error(), "budget 1ms") || !strings.Contains(err.Error(), batchagent.MinBudget.String()) {
		t.Fatalf("NewSpec(budget 1ms) = %v, want ErrBadJob naming the budget and the %v minimum", err, batchagent.MinBudget)
	}
}

// TestDeadPrimaryOpensBreakerThroughRetries: a primary that refuses every
// connection is retried until the budget ends; the agent's error keeps
// the refused connection beside the deadline, so the breaker counts it as
// the backend's failure and opens, and later agents skip the primary.
func TestDeadPrimaryOpensBreakerThroughRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		primary := refusing(nil)
		e := newEngine(t, batchagent.Config{MaxActive: 1, Breaker: batchagent.Breaker{Failures: 2, Cooldown: time.Hour}})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: primary, Task: "{id}", OutputSchema: json.RawMessage(outSchema), Budget: 300 * time.Millisecond,
			Fallbacks: []batchagent.Fallback{{Func: heuristic(&calls)}},
		}), batchagent.Slice(inputs(5)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.Tier != 1 {
				t.Errorf("result %d: tier %d err %v, want tier 1", r.Index, r.Tier, r.Err)
			}
		}
		if s := e.Stats(); s.BreakerChanges != 1 {
			t.Errorf("breaker changes %d, want 1 (closed to open)", s.BreakerChanges)
		}
		primary.mu.Lock()
		n := primary.n
		primary.mu.Unlock()
		before := n
		if _, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: primary, Task: "{id}", OutputSchema: json.RawMessage(outSchema), Budget: 300 * time.Millisecond,
			Fallbacks: []batchagent.Fallback{{Func: heuristic(&calls)}},
		}), batchagent.Slice(inputs(3))); err != nil {
			t.Fatal(err)
		}
		primary.mu.Lock()
		n = primary.n
		primary.mu.Unlock()
		if n != before {
			t.Errorf("primary called %d more times while its breaker is open, want 0", n-before)
		}
	})
}
