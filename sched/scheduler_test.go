package sched_test

import (
	"context"
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
	for _, cfg := range []sched.Config{{Limit: -1}, {Boost: -time.Second}} {
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
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []string
			wg    sync.WaitGroup
		)
		start := func(name string, prio int) {
			wg.Go(func() {
				if err := s.Acquire(t.Context(), sched.Batch, prio); err != nil {
					t.Errorf("Acquire(%s) = %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				s.Release()
			})
			synctest.Wait() // make arrival order deterministic
			time.Sleep(time.Microsecond)
		}
		start("fresh-a", 0)
		start("fresh-b", 0)
		start("turn2", 2)
		start("turn1", 1)
		start("turn2-late", 2)
		s.Release()
		wg.Wait()
		want := []string{"turn2", "turn2-late", "turn1", "fresh-a", "fresh-b"}
		if diff := cmp.Diff(want, order); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

// TestNoStarvation checks that a low-priority waiter that has waited longer
// than the priority credit is served before later high-priority arrivals.
func TestNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1, Boost: time.Second})
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatal(err)
		}
		served := make(chan string, 2) // one per waiter below
		go func() {
			if s.Acquire(t.Context(), sched.Batch, 0) == nil {
				served <- "old"
				s.Release()
			}
		}()
		time.Sleep(3 * time.Second) // the old waiter's wait exceeds 2×Boost
		go func() {
			if s.Acquire(t.Context(), sched.Batch, 2) == nil {
				served <- "new-prio2"
				s.Release()
			}
		}()
		synctest.Wait()
		s.Release()
		if got := <-served; got != "old" {
			t.Errorf("first served = %q, want %q", got, "old")
		}
		<-served
	})
}

// TestClassOrder checks that, with the limit full, an Interactive waiter
// that arrives last is served before every earlier Batch waiter, whatever
// their priority or waiting time, and Batch waiters then go by priority.
func TestClassOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(t, sched.Config{Limit: 1, Boost: time.Second})
		if err := s.Acquire(t.Context(), sched.Batch, 0); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []string
			wg    sync.WaitGroup
		)
		start := func(name string, class sched.Class, prio int) {
			wg.Go(func() {
				if err := s.Acquire(t.Context(), class, prio); err != nil {
					t.Errorf("Acquire(%s) = %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				s.Release()
			})
			synctest.Wait() // make arrival order deterministic
		}
		start("batch-old", sched.Batch, 0)
		time.Sleep(10 * time.Second) // less than the 100s credit of priority 100
		start("batch-prio100", sched.Batch, 100)
		start("interactive-last", sched.Interactive, 0)
		s.Release()
		wg.Wait()
		want := []string{"interactive-last", "batch-prio100", "batch-old"}
		if diff := cmp.Diff(want, order); diff != "" {
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
