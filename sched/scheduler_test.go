package sched_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSched(t *testing.T, cfg sched.Config) *sched.Scheduler {
	t.Helper()
	s, err := sched.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return s
}

func TestNewRejectsNegative(t *testing.T) {
	for _, cfg := range []sched.Config{{Limit: -1}, {Boost: -1}, {Boost: 1 << 31}} {
		if _, err := sched.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error, want error", cfg)
		}
	}
}

func TestUnlimitedNeverBlocks(t *testing.T) {
	s := newSched(t, sched.Config{})
	for range 1000 {
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatalf("Acquire = %v", err)
		}
	}
	if got := s.Stats(); got != (sched.Stats{Limit: 0, Inflight: 1000}) {
		t.Errorf("Stats() = %+v, want 1000 in flight, unlimited", got)
	}
	for range 1000 {
		s.Release()
	}
}

// TestPriorityOrder checks that higher priorities are served first and
// equal ones in arrival order.
func TestPriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1})
		got := queuedOrder(t, s, []arrival{{"fresh-a", 0, sched.Batch, 0}, {"fresh-b", 0, sched.Batch, 0}, {"turn2", 2, sched.Batch, 0}, {"turn1", 1, sched.Batch, 0}, {"turn2-late", 2, sched.Batch, 0}})
		want := []string{"turn2", "turn2-late", "turn1", "fresh-a", "fresh-b"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

// An arrival is a waiter of serveOrder.
type arrival struct {
	name  string
	prio  int
	class sched.Class
	flow  uint64
}

// queuedOrder holds s's only slot while the arrivals queue up in order,
// then serves them one after the other and returns the order in which
// they were served.
func queuedOrder(t *testing.T, s *sched.Scheduler, arrivals []arrival) []string {
	return serveOrder(t, s, arrivals, 0, false)
}

// serveOrder holds s's only slot and has the arrivals come one at a time.
// Each release of the slot, after a call of the given length, serves the
// best waiter so far, which then holds it. With interleave, the slot is
// released after each arrival from the second on; the waiters left are
// served at the end. It returns the order in which they were served.
func serveOrder(t *testing.T, s *sched.Scheduler, arrivals []arrival, call time.Duration, interleave bool) []string {
	t.Helper()
	if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	served, releases := make(chan struct{}), 0
	release := func() {
		time.Sleep(call)
		s.Release()
		<-served // the best waiter holds the slot now
		releases++
	}
	for i, a := range arrivals {
		wg.Go(func() {
			if err := s.AcquireFlow(t.Context(), a.class, a.flow, a.prio); err != nil {
				t.Errorf("Acquire(%s) = %v", a.name, err)
				served <- struct{}{}
				return
			}
			mu.Lock()
			order = append(order, a.name)
			mu.Unlock()
			served <- struct{}{}
		})
		synctest.Wait() // a deterministic arrival order
		if interleave && i > 0 {
			release()
		}
	}
	for releases < len(arrivals) {
		release()
	}
	time.Sleep(call)
	s.Release()
	wg.Wait()
	return order
}

// TestNoStarvation checks that a low-priority waiter that has waited
// longer than the priority credit is served before later high-priority
// arrivals: with one slot, a round is one grant, so a waiter of priority 1
// arriving two grants after a fresh one (Boost 2) no longer goes first.
func TestNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1, Boost: 2})
		got := serveOrder(t, s, []arrival{{"old", 0, sched.Batch, 0}, {"p1-a", 1, sched.Batch, 0}, {"p1-b", 1, sched.Batch, 0}, {"p1-c", 1, sched.Batch, 0}}, time.Millisecond, true)
		// p1-a arrives with the clock at 1, p1-b at 2: both ahead of old
		// (arrived at 1, credit 0). p1-c arrives at 3: 3 - 2 = old's key,
		// and old arrived first.
		want := []string{"p1-a", "p1-b", "old", "p1-c"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

// TestHugePriority checks that priorities too large for the credit to
// hold rank highest (lowest, negative) instead of overflowing the key, and
// that a negative priority goes behind priority 0.
func TestHugePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1, Boost: math.MaxInt32})
		got := queuedOrder(t, s, []arrival{{"negative", -3, sched.Batch, 0}, {"low", 0, sched.Batch, 0}, {"huge", math.MaxInt, sched.Batch, 0}, {"mid", 5, sched.Batch, 0}, {"most-negative", math.MinInt, sched.Batch, 0}})
		if diff := cmp.Diff([]string{"huge", "mid", "low", "negative", "most-negative"}, got); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

// TestOrderIndependentOfCallTime checks that the order of the waiters
// under PolicyTurns depends on the calls served, not on how long they
// took: the same arrivals, with calls of 10 ms and of 10 minutes, are
// served in the same order. On a clock of seconds the slow run lets the
// fresh waiter overtake the agents that have turns done.
func TestOrderIndependentOfCallTime(t *testing.T) {
	arrivals := []arrival{{"fresh", 0, sched.Batch, 0}, {"t1-a", 1, sched.Batch, 0}, {"t2-a", 2, sched.Batch, 0}, {"t1-b", 1, sched.Batch, 0}, {"t3-a", 3, sched.Batch, 0}, {"t1-c", 1, sched.Batch, 0}}
	var orders [][]string
	for _, call := range []time.Duration{10 * time.Millisecond, 10 * time.Minute} {
		synctest.Test(t, func(t *testing.T) {
			s := newSched(t, sched.Config{Limit: 1})
			orders = append(orders, serveOrder(t, s, arrivals, call, true))
		})
	}
	want := []string{"t1-a", "t2-a", "t1-b", "t3-a", "t1-c", "fresh"}
	for i, got := range orders {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("run %d: service order (-want +got):\n%s", i, diff)
		}
	}
}

// TestClassOrder checks that, with the limit full, an Interactive waiter
// that arrives last is served before every earlier Batch waiter, whatever
// their priority or waiting time, and Batch waiters then go by priority.
func TestClassOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1, Boost: 1})
		got := queuedOrder(t, s, []arrival{{"batch-old", 0, sched.Batch, 0}, {"batch-prio100", 100, sched.Batch, 0}, {"interactive-last", 0, sched.Interactive, 0}})
		want := []string{"interactive-last", "batch-prio100", "batch-old"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

func TestCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1})
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := s.Acquire(ctx, sched.Batch, 5)
		if err != context.DeadlineExceeded {
			t.Errorf("Acquire(expiring ctx) = %v, want %v", err, context.DeadlineExceeded)
		}
		if got := s.Stats(); got != (sched.Stats{Limit: 1, Inflight: 1}) {
			t.Errorf("Stats() after cancel = %+v, want one held and no waiters", got)
		}
		s.Release()
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Errorf("Acquire after release = %v", err)
		}
		s.Release()
	})
}

func TestAcquireOnDoneContextFailsWhenFull(t *testing.T) {
	s := newSched(t, sched.Config{Limit: 1})
	if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Acquire(ctx, sched.Batch, 0); err != context.Canceled {
		t.Errorf("Acquire(cancelled) = %v, want %v", err, context.Canceled)
	}
	s.Release()
}

// TestLimitRespected runs many workers and checks that in-flight never
// exceeds the limit, including after SetLimit changes it.
func TestLimitRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 4})
		var (
			mu      sync.Mutex
			cur     int
			maxSeen [2]int
			phase   int
			wg      sync.WaitGroup
		)
		work := func() {
			if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			cur++
			maxSeen[phase] = max(maxSeen[phase], cur)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			cur--
			mu.Unlock()
			s.Release()
		}
		for range 40 {
			wg.Go(work)
		}
		wg.Wait()
		s.SetLimit(2)
		mu.Lock()
		phase = 1
		mu.Unlock()
		for range 40 {
			wg.Go(work)
		}
		wg.Wait()
		if maxSeen != [2]int{4, 2} {
			t.Errorf("max in flight per phase = %v, want [4 2]", maxSeen)
		}
		if got := s.Limit(); got != 2 {
			t.Errorf("Limit() = %d, want 2", got)
		}
	})
}

func TestSetLimitWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1})
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			if s.Acquire(t.Context(), sched.Batch, 0) == nil {
				close(done)
			}
		}()
		synctest.Wait()
		s.SetLimit(2)
		<-done
		if got := s.Stats(); got != (sched.Stats{Limit: 2, Inflight: 2}) {
			t.Errorf("Stats() = %+v, want 2 held of 2", got)
		}
		s.Release()
		s.Release()
	})
}

func TestReleaseWithoutAcquirePanics(t *testing.T) {
	s := newSched(t, sched.Config{})
	defer func() {
		if recover() == nil {
			t.Error("Release without Acquire did not panic")
		}
	}()
	s.Release()
}
