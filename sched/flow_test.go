package sched_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
)

// waitFor polls until the scheduler has n waiters.
func waitFor(t *testing.T, s *sched.Scheduler, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting = %d, want %d", s.Stats().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// queue makes each of names wait, in order, in its class and flow, and
// returns the order in which they were served, one slot at a time.
func queue(t *testing.T, names []string, place func(string) (sched.Class, uint64, int)) []string {
	t.Helper()
	arrivals := make([]arrival, len(names))
	for i, name := range names {
		class, flow, prio := place(name)
		arrivals[i] = arrival{name, prio, class, flow}
	}
	var served []string
	synctest.Test(t, func(t *testing.T) {
		served = queuedOrder(t, newSched(t, sched.Config{Limit: 1}), arrivals)
	})
	return served
}

func TestInteractiveOvertakesBatch(t *testing.T) {
	got := queue(t, []string{"b1", "b2-prio", "b3", "i1", "i2"}, func(n string) (sched.Class, uint64, int) {
		switch n {
		case "i1", "i2":
			return sched.Interactive, 0, 0
		case "b2-prio":
			return sched.Batch, 0, 1000 // no priority in a class beats a higher class
		}
		return sched.Batch, 0, 0
	})
	if want := []string{"i1", "i2", "b2-prio", "b1", "b3"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
}

func TestFlowsTakeTurns(t *testing.T) {
	// Flow a queued all its waiters before flow b's first: still they
	// alternate, and each flow keeps its own order.
	got := queue(t, []string{"a1", "a2", "a3", "a4", "b1", "b2"}, func(n string) (sched.Class, uint64, int) {
		return sched.Batch, uint64(n[0]), 0
	})
	if want := []string{"a1", "b1", "a2", "b2", "a3", "a4"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
}

func TestPriorityWithinFlow(t *testing.T) {
	got := queue(t, []string{"a-0", "b-0", "a-5"}, func(n string) (sched.Class, uint64, int) {
		if n == "a-5" {
			return sched.Batch, 'a', 5
		}
		return sched.Batch, uint64(n[0]), 0
	})
	if want := []string{"a-5", "b-0", "a-0"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
}

func TestCancelledWaiterLeavesItsFlow(t *testing.T) {
	s, err := sched.New(sched.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.AcquireFlow(ctx, sched.Batch, 7, 0) }()
	waitFor(t, s, 1)
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("AcquireFlow = %v, want context.Canceled", err)
	}
	if w := s.Stats().Waiting; w != 0 {
		t.Fatalf("waiting = %d after cancel, want 0", w)
	}
	// The flow is gone: a new waiter of another flow is served next.
	done := make(chan error, 1)
	go func() { done <- s.AcquireFlow(t.Context(), sched.Batch, 8, 0) }()
	waitFor(t, s, 1)
	s.Release()
	if err := <-done; err != nil {
		t.Fatalf("AcquireFlow = %v", err)
	}
	s.Release()
	if st := s.Stats(); st.Inflight != 0 || st.Waiting != 0 {
		t.Errorf("stats %+v, want none held or waiting", st)
	}
}
