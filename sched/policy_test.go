package sched_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
	"github.com/google/go-cmp/cmp"
)

// TestPolicyOrder checks the order in which each policy serves the same
// waiters, arriving one after the other while the only slot is held.
func TestPolicyOrder(t *testing.T) {
	type arrival struct {
		name string
		o    sched.Order
	}
	arrivals := []arrival{
		{"fresh", sched.Order{}},
		{"long", sched.Order{Priority: 5, Attained: 9 * time.Second}},
		{"short", sched.Order{Priority: 1, Attained: time.Second}},
		{"mid", sched.Order{Priority: 2, Attained: 3 * time.Second}},
		{"back", sched.Order{Priority: 3, Attained: 4 * time.Second, Continuing: true}},
		{"fresh-late", sched.Order{}},
	}
	tests := []struct {
		policy sched.Policy
		want   []string
	}{
		// Continuing first; then arrival.
		{sched.PolicyFIFO, []string{"back", "fresh", "long", "short", "mid", "fresh-late"}},
		// Continuing first; then the most turns done (Boost 10s ≫ the
		// arrival gaps).
		{sched.PolicyTurns, []string{"back", "long", "mid", "short", "fresh", "fresh-late"}},
		// Continuing first; then the least attained service, ties by
		// arrival.
		{sched.PolicyLAS, []string{"back", "fresh", "fresh-late", "short", "mid", "long"}},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSched(t, sched.Config{Limit: 1, Policy: tt.policy})
				if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
					t.Fatal(err)
				}
				var (
					mu    sync.Mutex // protects order
					order []string
					wg    sync.WaitGroup
				)
				for _, a := range arrivals {
					wg.Go(func() {
						if err := s.AcquireOrder(t.Context(), sched.Batch, 0, a.o); err != nil {
							t.Errorf("AcquireOrder(%s) = %v", a.name, err)
							return
						}
						mu.Lock()
						order = append(order, a.name)
						mu.Unlock()
						time.Sleep(time.Millisecond)
						s.Release()
					})
					synctest.Wait() // a deterministic arrival order
					time.Sleep(time.Millisecond)
				}
				s.Release()
				wg.Wait()
				if diff := cmp.Diff(tt.want, order); diff != "" {
					t.Errorf("%v: service order (-want +got):\n%s", tt.policy, diff)
				}
			})
		})
	}
}

// TestPolicyFlowsStillTakeTurns checks that a policy orders waiters within
// a flow only: two flows still alternate, whatever their waiters' orders.
func TestPolicyFlowsStillTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1, Policy: sched.PolicyLAS})
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex // protects order
			order []string
			wg    sync.WaitGroup
		)
		for i, w := range []struct {
			name string
			flow uint64
			o    sched.Order
		}{
			{"a1", 1, sched.Order{Attained: time.Second}},
			{"a2", 1, sched.Order{}},
			{"b1", 2, sched.Order{Attained: time.Hour}},
		} {
			wg.Go(func() {
				if err := s.AcquireOrder(t.Context(), sched.Batch, w.flow, w.o); err != nil {
					t.Errorf("AcquireOrder(%d) = %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, w.name)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				s.Release()
			})
			synctest.Wait()
		}
		s.Release()
		wg.Wait()
		if diff := cmp.Diff([]string{"a2", "b1", "a1"}, order); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []sched.Policy{sched.PolicyTurns, sched.PolicyFIFO, sched.PolicyLAS} {
		got, err := sched.ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	if _, err := sched.ParsePolicy("srpt"); err == nil || !strings.Contains(err.Error(), "turns, fifo, las") {
		t.Errorf("ParsePolicy(srpt) = %v, want an error listing the policies", err)
	}
	if _, err := sched.New(sched.Config{Policy: 7}); err == nil {
		t.Error("New(Policy 7) = nil error, want error")
	}
}
