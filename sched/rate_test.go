package sched_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
)

func TestRatePacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := sched.NewRate(sched.RateConfig{RPM: 600}) // 10/s, burst 60
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for range 60 + 100 {
			if err := r.Wait(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
		}
		// The burst goes at once, then 100 more at 10/s.
		if got := time.Since(start); got < 9900*time.Millisecond || got > 10100*time.Millisecond {
			t.Errorf("160 requests at 600 rpm took %v, want 10s", got)
		}
	})
}

func TestRatePacesTokensAndCorrects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := sched.NewRate(sched.RateConfig{TPM: 60_000}) // 1000 tokens/s, burst 6000
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := r.Wait(t.Context(), 6000); err != nil { // the whole burst
			t.Fatal(err)
		}
		// The call really used 1000: 5000 come back, so the next 5000 go at once.
		r.Correct(6000, 1000)
		if err := r.Wait(t.Context(), 5000); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("after giving back unused tokens the next call waited %v, want 0", got)
		}
		// Underestimating costs the next caller.
		r.Correct(0, 3000)
		if err := r.Wait(t.Context(), 1000); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 4*time.Second {
			t.Errorf("after a 3000-token underestimate the next 1000 waited until %v, want 4s", got)
		}
	})
}

func TestRateLearnAndLimits(t *testing.T) {
	r, err := sched.NewRate(sched.RateConfig{RPM: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.CountsTokens() {
		t.Error("CountsTokens() without a TPM = true, want false")
	}
	r.Learn(500, 40_000, 0) // higher RPM than configured: keep 100; TPM unset: adopt
	if !r.CountsTokens() {
		t.Error("CountsTokens() after learning a TPM = false, want true")
	}
	if got, want := r.Limits(), (sched.RateConfig{RPM: 100, TPM: 40_000}); got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
	r.Learn(50, 0, 0)
	if got := r.Limits().RPM; got != 50 {
		t.Errorf("RPM after learning a lower limit = %d, want 50", got)
	}
	if _, err := sched.NewRate(sched.RateConfig{RPM: -1}); err == nil {
		t.Error("NewRate(negative) = nil error, want error")
	}
}

func TestRateCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := sched.NewRate(sched.RateConfig{RPM: 1})
		_ = r.Wait(t.Context(), 0) // takes the burst of 1
		tctx, tcancel := context.WithTimeout(t.Context(), time.Second)
		defer tcancel()
		if err := r.Wait(tctx, 0); err == nil {
			t.Error("Wait with a short deadline on an exhausted bucket = nil, want an error")
		}
	})
}

// TestRateSync: a backend that reports its budget spent drains the
// buckets, so the next call waits for the refill; a budget reported
// larger than the bucket's does not raise it, and unreported (negative)
// or unlimited kinds are left alone.
func TestRateSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := sched.NewRate(sched.RateConfig{RPM: 600}) // 10/s, burst 60
		if err != nil {
			t.Fatal(err)
		}
		if !r.Paced() {
			t.Fatal("Paced() = false with an RPM")
		}
		r.Sync(1000, 0, -1) // more than the burst; tokens unlimited: no effect
		start := time.Now()
		for range 60 {
			if err := r.Wait(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != 0 {
			t.Fatalf("the burst of 60 took %v after Sync(1000, 0, -1), want 0", got)
		}
		time.Sleep(6 * time.Second) // the bucket refills to 60
		r.Sync(-1, -1, -1)          // not reported: nothing changes
		r.Sync(0, -1, -1)           // spent: the next request waits 100ms
		start = time.Now()
		if err := r.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("a request after Sync(0) waited %v, want 100ms", got)
		}
	})
	r, _ := sched.NewRate(sched.RateConfig{})
	if r.Paced() {
		t.Error("Paced() = true without limits")
	}
	r.Learn(0, 60_000, 0)
	if !r.Paced() {
		t.Error("Paced() = false after learning a TPM")
	}
}

// TestRateOutputDebt: the output-token budget is paced by debt. A call
// starts while the bucket holds a token, takes the average output so far,
// and its real output, once known, may put the bucket in debt: after a
// call that used a minute's budget the next one waits about a minute.
func TestRateOutputDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := sched.NewRate(sched.RateConfig{OTPM: 60_000}) // 1000/s, burst 6000
		if err != nil {
			t.Fatal(err)
		}
		if !r.Paced() || !r.PacesOutput() || r.CountsTokens() {
			t.Fatalf("Paced, PacesOutput, CountsTokens = %v, %v, %v with an OTPM alone, want true, true, false", r.Paced(), r.PacesOutput(), r.CountsTokens())
		}
		start := time.Now()
		taken, err := r.TakeOutput(t.Context())
		if err != nil || taken != 1 {
			t.Fatalf("first TakeOutput() = %d, %v; want 1 (no answer yet), nil", taken, err)
		}
		r.SpendOutput(taken, 60_000) // the burst of 6000, and 54,000 of debt
		if err := r.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < 54*time.Second || got > 54100*time.Millisecond {
			t.Errorf("after a call that used a minute's output budget the next Wait waited %v, want about 54s (the debt's refill)", got)
		}
		// The next call takes the average output so far.
		if taken, err = r.TakeOutput(t.Context()); err != nil || taken != 60_000 {
			t.Fatalf("TakeOutput() after a 60,000-token answer = %d, %v; want 60000, nil", taken, err)
		}
		// It produced 1000: the excess comes back, and the average is now 30,500.
		r.SpendOutput(taken, 1000)
		start = time.Now()
		if taken, err = r.TakeOutput(t.Context()); err != nil || taken != 30_500 {
			t.Fatalf("TakeOutput() = %d, %v; want 30500, nil", taken, err)
		}
		if got := time.Since(start); got < 999*time.Millisecond || got > 1001*time.Millisecond {
			t.Errorf("TakeOutput with 999 tokens of debt left waited %v, want the refill of 1000: 1s", got)
		}
		// A refused call (no output) gives back what it took.
		r.SpendOutput(taken, 0)
		start = time.Now()
		if err := r.Wait(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("Wait after a refused call gave its share back waited %v, want 0", got)
		}
	})
}

// TestRateOutputTakesInTurn: calls waiting together on a bucket in debt
// take their shares one after the other, each waiting for the refill of
// the previous one's, not all at once when the first token comes back.
func TestRateOutputTakesInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := sched.NewRate(sched.RateConfig{OTPM: 60_000}) // 1000/s, burst 6000
		taken, _ := r.TakeOutput(t.Context())
		r.SpendOutput(taken, 7000) // average 7000; the bucket at -1000
		start := time.Now()
		var mu sync.Mutex
		var took []time.Duration
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if _, err := r.TakeOutput(t.Context()); err != nil {
					t.Error(err)
				}
				mu.Lock()
				took = append(took, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(took)
		want := []time.Duration{1001 * time.Millisecond, 8001 * time.Millisecond, 15001 * time.Millisecond}
		for i := range want {
			if d := took[i] - want[i]; d < -2*time.Millisecond || d > 2*time.Millisecond {
				t.Errorf("three calls on a bucket 1000 tokens in debt, 7000 each, started after %v; want about %v", took, want)
				break
			}
		}
	})
}

// TestRateOutputLearnSyncLimits: an output limit reported by the backend
// is adopted when none is configured and only ever lowers one; Sync drains
// the bucket to what the backend says is left; without a limit nothing is
// taken or waited for.
func TestRateOutputLearnSyncLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := sched.NewRate(sched.RateConfig{})
		if taken, err := r.TakeOutput(t.Context()); taken != 0 || err != nil || r.PacesOutput() {
			t.Fatalf("TakeOutput() without a limit = %d, %v (paces %v); want 0, nil, false", taken, err, r.PacesOutput())
		}
		r.SpendOutput(0, 1_000_000)
		r.Sync(-1, -1, 0)
		start := time.Now()
		if err := r.Wait(t.Context(), 0); err != nil || time.Since(start) != 0 {
			t.Fatalf("Wait() without any limit = %v after %v, want nil at once", err, time.Since(start))
		}
		r.Learn(0, 0, 60_000)
		if got, want := r.Limits(), (sched.RateConfig{OTPM: 60_000}); got != want {
			t.Errorf("Limits() after learning an OTPM = %+v, want %+v", got, want)
		}
		r.Learn(0, 0, 600_000) // higher: kept at 60,000
		r.Learn(0, 0, 0)       // not reported
		if got := r.Limits().OTPM; got != 60_000 {
			t.Errorf("OTPM after learning a higher limit = %d, want 60000", got)
		}
		time.Sleep(10 * time.Second) // full: 6000
		r.Sync(-1, -1, 0)            // spent
		start = time.Now()
		if _, err := r.TakeOutput(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != time.Millisecond {
			t.Errorf("TakeOutput after Sync(-1, -1, 0) waited %v, want 1ms", got)
		}
		r.Learn(0, 0, 6000)
		if got := r.Limits().OTPM; got != 6000 {
			t.Errorf("OTPM after learning a lower limit = %d, want 6000", got)
		}
		if _, err := sched.NewRate(sched.RateConfig{OTPM: -1}); err == nil {
			t.Error("NewRate(negative OTPM) = nil error, want error")
		}
		tctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		r.SpendOutput(0, 60_000)
		if _, err := r.TakeOutput(tctx); err == nil {
			t.Error("TakeOutput on a bucket in debt with a short deadline = nil error, want one")
		}
	})
}
