package queue_test

import (
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/queue"
)

// TestSharedRateLearns checks that limits one process learnt from a
// backend's headers pace every process sharing the key: a learning
// SharedRate with nothing configured admits at once, then, once another
// learnt 3000 rpm (50 a second, burst 50), 100 requests through it take
// about a second; and that a configured lower limit wins.
func TestSharedRateLearns(t *testing.T) {
	rdb, _ := limitRedis(t)
	a := newSharedRate(t, rdb, "ba:rate:learn", queue.SharedRateConfig{Learn: true})
	b := newSharedRate(t, rdb, "ba:rate:learn", queue.SharedRateConfig{Learn: true})
	start := time.Now()
	for range 200 {
		if err := b.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := time.Since(start); got > 500*time.Millisecond {
		t.Fatalf("200 requests with no limit learnt took %v, want at once", got)
	}
	a.Sync(t.Context(), 3000, 2990, 0, -1)
	if rpm, tpm := a.Limits(); rpm != 3000 || tpm != 0 {
		t.Fatalf("a's limits after Sync = %d rpm, %d tpm; want 3000, 0", rpm, tpm)
	}
	time.Sleep(1100 * time.Millisecond) // b rereads the learnt limits once a second
	start = time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if err := b.Wait(t.Context(), 0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if rpm, _ := b.Limits(); rpm != 3000 {
		t.Errorf("b's learnt rpm = %d, want 3000", rpm)
	}
	if got := time.Since(start); got < 900*time.Millisecond || got > 5*time.Second {
		t.Errorf("100 requests at a learnt 3000 rpm took %v, want about 1s", got)
	}

	low := newSharedRate(t, rdb, "ba:rate:learn", queue.SharedRateConfig{RPM: 600, Learn: true})
	low.Sync(t.Context(), 3000, 3000, 0, -1)
	if rpm, _ := low.Limits(); rpm != 600 {
		t.Errorf("configured 600 rpm, learnt 3000: limit %d, want 600", rpm)
	}
}

// TestSharedRateSyncLowers checks that a reported remaining count below
// the burst lowers the shared budget: at 6000 rpm (100 a second, burst
// 100), after a report that 0 remain, the next 50 requests wait about
// half a second instead of passing at once.
func TestSharedRateSyncLowers(t *testing.T) {
	rdb, _ := limitRedis(t)
	s := newSharedRate(t, rdb, "ba:rate:lower", queue.SharedRateConfig{RPM: 6000, Learn: true})
	s.Sync(t.Context(), 6000, 0, 0, -1)
	start := time.Now()
	for range 50 {
		if err := s.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := time.Since(start); got < 400*time.Millisecond || got > 3*time.Second {
		t.Errorf("50 requests after 0 remaining took %v, want about 0.5s", got)
	}
	// Without Learn, a report changes nothing.
	plain := newSharedRate(t, rdb, "ba:rate:plain", queue.SharedRateConfig{RPM: 6000})
	plain.Sync(t.Context(), 60, 0, 0, -1)
	if rpm, _ := plain.Limits(); rpm != 6000 {
		t.Errorf("a SharedRate that does not learn took a reported limit: %d rpm", rpm)
	}
}
