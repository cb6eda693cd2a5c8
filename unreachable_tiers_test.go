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
	"github.com/batchagent/batchagent/llm"
)

// refusing returns a fake hosted backend whose calls are refused at once,
// except those for which answers returns true.
func refusing(answers func(n int) bool) *scriptModel {
	return &scriptModel{plan: func(n int, _ *llm.Request) step {
		if answers != nil && answers(n) {
			return step{}
		}
		return step{err: refused}
	}}
}

// TestNoTierReachableStopsRun: with fallbacks, a backend that refuses
// every connection on every tier stops the run as it does without
// fallbacks: the inputs stay pending (kind canceled, wrapping
// ErrBackendUnavailable) with the connection failure named, and none is
// written as a timeout of the budget.
func TestNoTierReachableStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		e := newEngine(t, batchagent.Config{})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: refusing(nil), Task: "{id}", Budget: 2 * time.Second,
			Fallbacks: []batchagent.Fallback{{Model: refusing(nil), ModelName: "small"}},
		}), batchagent.Slice(inputs(20)))
		if err != nil {
			t.Fatal(err)
		}
		wantAllUnavailable(t, "dead tiers", res, 20)
		for _, r := range res {
			if !strings.Contains(r.Err.Error(), "connection refused") {
				t.Fatalf("result %d: %v, want the connection failure named", r.Index, r.Err)
			}
		}
		if st := e.Stats(); st.ByKind[batchagent.KindCanceled] != 20 || st.ByKind[batchagent.KindTimeout] != 0 {
			t.Errorf("by kind %v, want 20 canceled and no timeout", st.ByKind)
		}
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("run took %v, want it stopped once the first agent's tiers were all found unreachable (budget 2s + a quarter)", took)
		}
	})
}

// TestFuncTierAnswersDeadBackends: a func tier answers whatever the
// models' backends do, so a dead backend on every model tier stops
// nothing: every input is answered by the func tier.
func TestFuncTierAnswersDeadBackends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		e := newEngine(t, batchagent.Config{MaxActive: 2}) // the run lasts past the start windows
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: refusing(nil), Task: "{id}", OutputSchema: json.RawMessage(outSchema), Budget: 500 * time.Millisecond,
			Fallbacks: []batchagent.Fallback{{Model: refusing(nil), ModelName: "small"}, {Func: heuristic(&calls)}},
		}), batchagent.Slice(inputs(30)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.Tier != 2 {
				t.Fatalf("result %d: tier %d err %v, want the func tier's answer", r.Index, r.Tier, r.Err)
			}
		}
		if calls.Load() != 30 {
			t.Errorf("func tier called %d times, want 30", calls.Load())
		}
	})
}

// TestTierFailureNamesCause: tiers that answered earlier in the run and
// then refuse every connection are not unreachable: the agent fails when
// its budget runs out, as a timeout, and its error names the connection
// failure it was retrying, not only the deadline.
func TestTierFailureNamesCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, batchagent.Config{MaxActive: 1})
		res, err := e.Run(t.Context(), mustSpec(t, batchagent.Def{
			Model: refusing(func(n int) bool { return n == 1 }), Task: "{id}", Budget: time.Second,
			Fallbacks: []batchagent.Fallback{{Model: refusing(func(n int) bool { return n == 1 }), ModelName: "small"}},
		}), batchagent.Slice(inputs(3)))
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[0].Tier != 0 || res[1].Err != nil || res[1].Tier != 1 {
			t.Fatalf("results 0, 1: tier %d %v, tier %d %v; want answers by tiers 0 and 1", res[0].Tier, res[0].Err, res[1].Tier, res[1].Err)
		}
		r := res[2]
		if batchagent.KindOf(r.Err) != batchagent.KindTimeout || !errors.Is(r.Err, llm.ErrConnection) || !strings.Contains(r.Err.Error(), "connection refused") {
			t.Fatalf("result 2: %v (kind %q), want a timeout naming the refused connection", r.Err, batchagent.KindOf(r.Err))
		}
	})
}
