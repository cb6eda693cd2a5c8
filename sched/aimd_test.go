package sched_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
)

func newAIMD(t *testing.T, cfg sched.AIMDConfig) (*sched.Scheduler, *sched.AIMD) {
	t.Helper()
	s := newSched(t, sched.Config{})
	a, err := sched.NewAIMD(s, cfg)
	if err != nil {
		t.Fatalf("NewAIMD(%+v) = %v", cfg, err)
	}
	return s, a
}

func TestAIMDRejectsBadConfig(t *testing.T) {
	s := newSched(t, sched.Config{})
	for _, cfg := range []sched.AIMDConfig{{}, {Max: 4, Initial: 5}, {Min: 3, Max: 2}} {
		if _, err := sched.NewAIMD(s, cfg); err == nil {
			t.Errorf("NewAIMD(%+v) = nil error, want error", cfg)
		}
	}
}

func TestAIMDIncreaseAndDecrease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, a := newAIMD(t, sched.AIMDConfig{Max: 10, Initial: 4})
		if s.Limit() != 4 {
			t.Fatalf("scheduler limit = %d, want the initial 4", s.Limit())
		}
		for range 3 {
			a.Observe(a.Epoch(), false)
		}
		if a.Limit() != 4 {
			t.Errorf("limit after 3 clean = %d, want 4 (window is 4)", a.Limit())
		}
		a.Observe(a.Epoch(), false)
		if a.Limit() != 5 || s.Limit() != 5 {
			t.Errorf("limit after a full window = %d (scheduler %d), want 5", a.Limit(), s.Limit())
		}
		old := a.Epoch() // calls admitted under the limit of 5
		a.Observe(old, true)
		if a.Limit() != 2 {
			t.Errorf("limit after congestion = %d, want 2", a.Limit())
		}
		// The other calls sent under the old limit halve nothing more.
		a.Observe(old, true)
		a.Observe(old, true)
		if a.Limit() != 2 || a.Decreases() != 1 {
			t.Errorf("limit %d decreases %d after a burst, want 2 and 1", a.Limit(), a.Decreases())
		}
		a.Observe(a.Epoch(), true) // a call admitted under the new limit
		if a.Limit() != 1 {
			t.Errorf("limit = %d, want the minimum 1", a.Limit())
		}
		a.Observe(a.Epoch(), true)
		if a.Limit() != 1 {
			t.Errorf("limit = %d, never below the minimum 1", a.Limit())
		}
		// Growth stops at the maximum.
		for range 1000 {
			a.Observe(a.Epoch(), false)
		}
		if a.Limit() != 10 {
			t.Errorf("limit after many clean = %d, want the maximum 10", a.Limit())
		}
		h := a.History()
		if h[0].Limit != 4 || h[len(h)-1].Limit != 10 {
			t.Errorf("history = %+v, want from 4 to 10", h)
		}
	})
}

// TestAIMDConverges simulates a backend that throttles above k concurrent
// calls: the limit settles around k.
func TestAIMDConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 6
		s, a := newAIMD(t, sched.AIMDConfig{Max: 64})
		ctx := t.Context()
		done := make(chan struct{})
		inflight := 0
		var mu = make(chan struct{}, 1) // guards inflight
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					if err := s.Acquire(ctx, sched.Batch, 0); err != nil {
						return
					}
					epoch := a.Epoch()
					mu <- struct{}{}
					inflight++
					over := inflight > k
					<-mu
					time.Sleep(20 * time.Millisecond)
					mu <- struct{}{}
					inflight--
					<-mu
					s.Release()
					a.Observe(epoch, over)
				}
			})
		}
		// The limit saws between about k/2 and k+1: one sample at the end
		// can land at the bottom of a halving (2 was seen once), so the
		// test averages the limit over the last 20 of 30 seconds.
		time.Sleep(10 * time.Second)
		var sum, n, most int
		for range 200 {
			time.Sleep(100 * time.Millisecond)
			l := a.Limit()
			sum, n, most = sum+l, n+1, max(most, l)
		}
		close(done)
		wg.Wait()
		mean := float64(sum) / float64(n)
		t.Logf("limit over the last 20s: mean %.2f, at most %d (%d samples)", mean, most, n)
		if mean < k/2 || mean > k+2 || most > 2*k {
			t.Errorf("limit over the last 20s: mean %.2f, at most %d; want a mean near k=%d and never above %d", mean, most, k, 2*k)
		}
	})
}

func TestAIMDSlowStart(t *testing.T) {
	_, a := newAIMD(t, sched.AIMDConfig{Max: 100, Initial: 2, SlowStart: true})
	for range 6 {
		a.Observe(a.Epoch(), false)
	}
	if a.Limit() != 8 {
		t.Errorf("limit after 6 clean completions in slow start = %d, want 8", a.Limit())
	}
	a.Observe(a.Epoch(), true) // congestion ends slow start
	for range 4 {
		a.Observe(a.Epoch(), false)
	}
	if a.Limit() != 5 {
		t.Errorf("limit = %d, want 4 after halving, +1 after a window of 4", a.Limit())
	}
	_, b := newAIMD(t, sched.AIMDConfig{Max: 100, Initial: 2, SlowStart: true})
	b.EndSlowStart()
	b.Observe(b.Epoch(), false)
	if b.Limit() != 2 {
		t.Errorf("limit after EndSlowStart and one completion = %d, want 2", b.Limit())
	}
}
