package sched_test

import (
	"context"
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
	r.Learn(500, 40_000) // higher RPM than configured: keep 100; TPM unset: adopt
	if !r.CountsTokens() {
		t.Error("CountsTokens() after learning a TPM = false, want true")
	}
	if got, want := r.Limits(), (sched.RateConfig{RPM: 100, TPM: 40_000}); got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
	r.Learn(50, 0)
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
		r.Sync(1000, 0) // more than the burst; tokens unlimited: no effect
		start := time.Now()
		for range 60 {
			if err := r.Wait(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != 0 {
			t.Fatalf("the burst of 60 took %v after Sync(1000, 0), want 0", got)
		}
		time.Sleep(6 * time.Second) // the bucket refills to 60
		r.Sync(-1, -1)              // not reported: nothing changes
		r.Sync(0, -1)               // spent: the next request waits 100ms
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
	r.Learn(0, 60_000)
	if !r.Paced() {
		t.Error("Paced() = false after learning a TPM")
	}
}
