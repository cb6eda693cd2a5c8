package sched_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
	"github.com/google/go-cmp/cmp"
)

func newGate(t *testing.T, cfg sched.GateConfig) *sched.Gate {
	t.Helper()
	g, err := sched.NewGate(cfg)
	if err != nil {
		t.Fatalf("NewGate(%+v) = %v", cfg, err)
	}
	return g
}

// admit acquires a Batch ticket of priority 0, failing the test on error.
func admit(t *testing.T, g *sched.Gate) *sched.Ticket {
	t.Helper()
	tk, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 0)
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	return tk
}

// limits returns the limits of a history, without their times.
func limits(h []sched.Change) []int {
	var l []int
	for _, c := range h {
		l = append(l, c.Limit)
	}
	return l
}

func TestGateRejectsBadConfig(t *testing.T) {
	for _, cfg := range []sched.GateConfig{
		{Limit: -1},
		{Limit: 4, Initial: 5},
		{Initial: 2},
		{RPM: -1},
		{TPM: -1},
		{OTPM: -1},
		{MaxQueued: -1},
		{ProbeInterval: -time.Second},
		{PauseBase: -time.Second},
		{PauseMax: -time.Second},
		{StartWindow: -time.Second},
	} {
		if _, err := sched.NewGate(cfg); err == nil {
			t.Errorf("NewGate(%+v) = nil error, want error", cfg)
		}
	}
}

func TestGateZeroConfigAdmitsAll(t *testing.T) {
	g := newGate(t, sched.GateConfig{})
	var held []*sched.Ticket
	for range 100 {
		held = append(held, admit(t, g))
	}
	if got := g.Stats(); got.Inflight != 100 || got.Limit != 0 || got.LimitHistory != nil {
		t.Errorf("Stats() = %+v, want 100 in flight, unlimited, no history", got)
	}
	for _, tk := range held {
		tk.Release(sched.Outcome{})
	}
}

// TestGateWarmFirstCallAlone checks that with prefix warming the first call
// goes alone: the others are admitted only once it has been released.
func TestGateWarmFirstCallAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 8, Warm: true})
		first := admit(t, g)
		var (
			mu       sync.Mutex
			admitted []time.Time
			wg       sync.WaitGroup
		)
		for range 3 {
			wg.Go(func() {
				tk := admit(t, g)
				mu.Lock()
				admitted = append(admitted, time.Now())
				mu.Unlock()
				tk.Release(sched.Outcome{})
			})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		n := len(admitted)
		mu.Unlock()
		if n != 0 {
			t.Fatalf("%d calls admitted while the warm-up call was in flight, want 0", n)
		}
		released := time.Now()
		first.Release(sched.Outcome{})
		wg.Wait()
		if len(admitted) != 3 {
			t.Fatalf("%d calls admitted after the warm-up, want 3", len(admitted))
		}
		for _, at := range admitted {
			if at != released {
				t.Errorf("a call was admitted at %v, want at the warm-up's release %v", at, released)
			}
		}
	})
}

// TestGateWarmFailedAcquireLetsOthersGo checks that a warm-up call that
// was never admitted does not hold the others.
func TestGateWarmFailedAcquireLetsOthersGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 1, Warm: true})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := g.Acquire(ctx, sched.Batch, 0, 0, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("warm-up Acquire with a canceled context = %v, want Canceled", err)
		}
		start := time.Now()
		admit(t, g).Release(sched.Outcome{})
		if d := time.Since(start); d != 0 {
			t.Errorf("the next call waited %v, want no wait for a warm-up that never ran", d)
		}
	})
}

// TestGateStopEndsWaits checks that closing Stop ends the waits for the
// warm-up, for backpressure and for an outage pause with ErrStopped.
func TestGateStopEndsWaits(t *testing.T) {
	t.Run("warm", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stop := make(chan struct{})
			g := newGate(t, sched.GateConfig{Warm: true, Stop: stop})
			first := admit(t, g)
			defer first.Release(sched.Outcome{})
			errc := make(chan error, 1) // the one waiter's result
			go func() {
				_, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 0)
				errc <- err
			}()
			synctest.Wait()
			close(stop)
			if err := <-errc; !errors.Is(err, sched.ErrStopped) {
				t.Errorf("Acquire behind the warm-up after Stop = %v, want ErrStopped", err)
			}
		})
	})
	t.Run("backpressure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stop := make(chan struct{})
			g := newGate(t, sched.GateConfig{Stop: stop, Probe: func(context.Context) (int, error) { return 100, nil }})
			r := g.BeginRun(t.Context())
			defer g.EndRun(r)
			time.Sleep(sched.DefaultProbeInterval)
			synctest.Wait()
			errc := make(chan error, 1) // the one waiter's result
			go func() {
				_, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 0)
				errc <- err
			}()
			synctest.Wait()
			close(stop)
			if err := <-errc; !errors.Is(err, sched.ErrStopped) {
				t.Errorf("Acquire during backpressure after Stop = %v, want ErrStopped", err)
			}
		})
	})
	t.Run("outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stop := make(chan struct{})
			g := newGate(t, sched.GateConfig{Stop: stop})
			admit(t, g).Release(sched.Outcome{Signal: sched.SignalCongested, RetryAfter: 10 * time.Second})
			close(stop)
			start := time.Now()
			if _, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 0); !errors.Is(err, sched.ErrStopped) {
				t.Errorf("Acquire during a pause after Stop = %v, want ErrStopped", err)
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("Acquire after Stop returned after %v, want at once", d)
			}
		})
	})
}

// TestGateClassOrder checks that the gate's slot wait serves an
// Interactive call that arrives last before waiting Batch calls.
func TestGateClassOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 1, Fixed: true})
		hold := admit(t, g)
		var (
			mu    sync.Mutex
			order []string
			wg    sync.WaitGroup
		)
		start := func(name string, class sched.Class, prio int) {
			wg.Go(func() {
				tk, err := g.Acquire(t.Context(), class, 0, prio, 0)
				if err != nil {
					t.Errorf("Acquire(%s) = %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				tk.Release(sched.Outcome{})
			})
			synctest.Wait()
		}
		start("batch-turn9", sched.Batch, 9)
		start("batch-turn0", sched.Batch, 0)
		start("interactive", sched.Interactive, 0)
		if got := g.Stats().Waiting; got != 3 {
			t.Errorf("Stats().Waiting = %d, want 3", got)
		}
		hold.Release(sched.Outcome{})
		wg.Wait()
		if diff := cmp.Diff([]string{"interactive", "batch-turn9", "batch-turn0"}, order); diff != "" {
			t.Errorf("service order (-want +got):\n%s", diff)
		}
	})
}

// TestGateAIMDObservations checks which outcomes the adaptive limit
// learns from: congestion halves it once per window, successes grow it,
// other failures and abandoned calls change nothing.
func TestGateAIMDObservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, Initial: 4})
		// Two calls admitted under 4: both congested, one decrease.
		a, b := admit(t, g), admit(t, g)
		a.Release(sched.Outcome{Signal: sched.SignalCongested, Err: errors.New("429")})
		b.Release(sched.Outcome{Signal: sched.SignalCongested})
		if got := g.Stats(); got.Limit != 2 || got.Throttles != 2 {
			t.Errorf("after two congested calls: limit %d throttles %d, want 2 and 2", got.Limit, got.Throttles)
		}
		for _, s := range []sched.Signal{sched.SignalFailed, sched.SignalAbandoned, sched.SignalFailed, sched.SignalAbandoned} {
			admit(t, g).Release(sched.Outcome{Signal: s})
		}
		if got := g.Stats().Limit; got != 2 {
			t.Errorf("limit after failed and abandoned calls = %d, want 2 unchanged", got)
		}
		admit(t, g).Release(sched.Outcome{})
		admit(t, g).Release(sched.Outcome{})
		got := g.Stats()
		if diff := cmp.Diff([]int{4, 2, 3}, limits(got.LimitHistory)); diff != "" {
			t.Errorf("limit history (-want +got):\n%s", diff)
		}
		if got.Throttles != 2 {
			t.Errorf("Throttles = %d, want 2", got.Throttles)
		}
	})
	g := newGate(t, sched.GateConfig{Limit: 16, Fixed: true})
	admit(t, g).Release(sched.Outcome{Signal: sched.SignalCongested})
	if got := g.Stats(); got.Limit != 16 || got.LimitHistory != nil || got.Throttles != 1 {
		t.Errorf("fixed gate after congestion: %+v, want limit 16, no history, 1 throttle", got)
	}
}

// TestGateRateBudgets checks the request budget's pacing, and that tokens
// count only under a token budget, are corrected by the real usage, and
// that limits the backend reports are adopted.
func TestGateRateBudgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{RPM: 600}) // 10/s, burst 60
		start := time.Now()
		for range 160 {
			admit(t, g).Release(sched.Outcome{Tokens: 100})
		}
		if got := time.Since(start); got < 9900*time.Millisecond || got > 10100*time.Millisecond {
			t.Errorf("160 calls at 600 rpm took %v, want 10s", got)
		}
		if g.CountsTokens() {
			t.Error("CountsTokens() without a token budget = true, want false")
		}
		// The backend reports 60,000 tokens a minute: 1000/s, burst 6000.
		tk := admit(t, g)
		tk.Release(sched.Outcome{LimitTokens: 60_000, LimitRequests: 6000})
		if !g.CountsTokens() {
			t.Fatal("CountsTokens() after the backend reported a TPM = false, want true")
		}
		if got := g.Stats(); got.RPM != 600 || got.TPM != 60_000 {
			t.Errorf("Stats() rates = %d rpm %d tpm, want 600 (lower than reported) and 60000", got.RPM, got.TPM)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{TPM: 60_000}) // 1000 tokens/s, burst 6000
		start := time.Now()
		tk, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 6000)
		if err != nil {
			t.Fatal(err)
		}
		tk.Release(sched.Outcome{Tokens: 1000}) // 5000 come back
		tk, err = g.Acquire(t.Context(), sched.Batch, 0, 0, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("after usage gave back 5000 tokens the next call waited %v, want 0", got)
		}
		tk.Release(sched.Outcome{}) // usage unknown: the estimate stands
		tk, err = g.Acquire(t.Context(), sched.Batch, 0, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		tk.Release(sched.Outcome{})
		if got := time.Since(start); got != time.Second {
			t.Errorf("the third call was admitted after %v, want 1s (the budget was spent)", got)
		}
	})
}

// TestGateBackpressure checks that the probe, running while a run is
// registered, pauses admission while the backend's queue is long, resumes
// it when the queue drains, ends slow start, and resumes admission when
// the last run ends.
func TestGateBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waiting atomic.Int64
		waiting.Store(100)
		g := newGate(t, sched.GateConfig{Limit: 64, Initial: 2, SlowStart: true, MaxQueued: 4, ProbeInterval: 100 * time.Millisecond,
			Probe: func(context.Context) (int, error) { return int(waiting.Load()), nil }})
		r := g.BeginRun(t.Context())
		begin := time.Now()
		held := admit(t, g) // before the first probe
		time.Sleep(150 * time.Millisecond)
		admittedAt := make(chan time.Time, 1) // the one waiter below
		go func() {
			tk := admit(t, g)
			admittedAt <- time.Now()
			tk.Release(sched.Outcome{})
		}()
		time.Sleep(time.Second)
		waiting.Store(4) // not more than MaxQueued
		if got := (<-admittedAt).Sub(begin); got != 1200*time.Millisecond {
			t.Errorf("call admitted at %v, want at the first probe after the queue drained (1.2s)", got)
		}
		// The long queue ended slow start: two clean calls grow the limit
		// by one window (2 → 3), not by one each (2 → 4).
		held.Release(sched.Outcome{})
		if got := g.Stats(); got.Limit != 3 || got.Pauses != 1 {
			t.Errorf("Stats() = limit %d pauses %d, want 3 (slow start ended) and 1", got.Limit, got.Pauses)
		}
		// Paused again, then the last run ends: admission resumes at once.
		waiting.Store(100)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		done := make(chan struct{})
		go func() {
			admit(t, g).Release(sched.Outcome{})
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a call was admitted while the queue was long")
		default:
		}
		g.EndRun(r)
		<-done
	})
}

// TestGateProbeFailureAdmits checks that a failing probe turns
// backpressure off rather than holding admission.
func TestGateProbeFailureAdmits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		g := newGate(t, sched.GateConfig{Probe: func(context.Context) (int, error) {
			if fail.Load() {
				return 0, errors.New("probe: connection refused")
			}
			return 100, nil
		}})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		time.Sleep(sched.DefaultProbeInterval)
		synctest.Wait()
		fail.Store(true)
		start := time.Now()
		admit(t, g).Release(sched.Outcome{})
		if got := time.Since(start); got != sched.DefaultProbeInterval {
			t.Errorf("admitted after %v, want at the next (failing) probe, %v", got, sched.DefaultProbeInterval)
		}
	})
}

// TestGateProbeOwnedByRuns checks that the probe runs while at least one
// run is registered, is not called once the last EndRun has returned, and
// starts again with the next run.
func TestGateProbeOwnedByRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		g := newGate(t, sched.GateConfig{ProbeInterval: time.Second, Probe: func(context.Context) (int, error) {
			calls.Add(1)
			return 0, nil
		}})
		time.Sleep(5 * time.Second)
		if n := calls.Load(); n != 0 {
			t.Fatalf("probe called %d times before any run, want 0", n)
		}
		r1 := g.BeginRun(t.Context())
		r2 := g.BeginRun(t.Context())
		time.Sleep(2500 * time.Millisecond)
		g.EndRun(r1)
		g.EndRun(r1) // a second end changes nothing
		time.Sleep(2 * time.Second)
		if n := calls.Load(); n != 4 {
			t.Errorf("probe called %d times in 4.5s of runs, want 4 (one probe for both runs)", n)
		}
		g.EndRun(r2)
		after := calls.Load()
		time.Sleep(10 * time.Second)
		if n := calls.Load(); n != after {
			t.Errorf("probe called %d times after the last EndRun returned, want 0", n-after)
		}
		r3 := g.BeginRun(t.Context())
		time.Sleep(1500 * time.Millisecond)
		g.EndRun(r3)
		if n := calls.Load(); n != after+1 {
			t.Errorf("probe called %d times in a new 1.5s run, want 1", n-after)
		}
	})
}

// TestGateCancelHoldsNothing checks that a call whose context ends while
// it waits for a slot or a pause holds nothing.
func TestGateCancelHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 1})
		hold := admit(t, g)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := g.Acquire(ctx, sched.Batch, 0, 0, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire on a full gate with a 1s deadline = %v, want DeadlineExceeded", err)
		}
		hold.Release(sched.Outcome{Signal: sched.SignalCongested, RetryAfter: time.Minute})
		ctx2, cancel2 := context.WithTimeout(t.Context(), time.Second)
		defer cancel2()
		if _, err := g.Acquire(ctx2, sched.Batch, 0, 0, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire during a pause with a 1s deadline = %v, want DeadlineExceeded", err)
		}
		if got := g.Stats(); got.Inflight != 0 || got.Waiting != 0 {
			t.Errorf("Stats() = %+v, want nothing held or waiting", got)
		}
	})
}

// TestGateBackpressureWhileWaitingForSlot checks that a call granted its
// slot while backpressure paused admission gives the slot back and waits
// for the queue to drain.
func TestGateBackpressureWhileWaitingForSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waiting atomic.Int64
		g := newGate(t, sched.GateConfig{Limit: 1, Fixed: true, ProbeInterval: 100 * time.Millisecond,
			Probe: func(context.Context) (int, error) { return int(waiting.Load()), nil }})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		begin := time.Now()
		hold := admit(t, g)
		admittedAt := make(chan time.Duration, 1) // the one waiter
		go func() {
			tk := admit(t, g)
			admittedAt <- time.Since(begin)
			tk.Release(sched.Outcome{})
		}()
		synctest.Wait() // the waiter waits for the slot
		waiting.Store(100)
		time.Sleep(150 * time.Millisecond) // the probe at 100ms pauses
		hold.Release(sched.Outcome{})
		time.Sleep(time.Second)
		waiting.Store(0)
		if got := <-admittedAt; got != 1200*time.Millisecond {
			t.Errorf("waiter admitted after %v, want at the probe after the queue drained, 1.2s", got)
		}
	})
}

// TestGateLimitDefaults checks the admission policy of GateConfig's
// defaults: the backend's declared concurrency is the limit when none is
// set and the first limit when lower, slow start begins at most at
// DefaultSlowStartFrom, and Limits says whether the gate limits anything.
func TestGateLimitDefaults(t *testing.T) {
	probe := func(context.Context) (int, error) { return 0, nil }
	for _, c := range []struct {
		name       string
		cfg        sched.GateConfig
		wantLimit  int
		wantLimits bool
	}{
		{"nothing", sched.GateConfig{}, 0, false},
		{"declared", sched.GateConfig{Declared: 16}, 16, true},
		{"declared below the limit", sched.GateConfig{Limit: 64, Declared: 16}, 16, true},
		{"declared above the limit", sched.GateConfig{Limit: 4, Declared: 16}, 4, true},
		{"slow start", sched.GateConfig{Limit: 64, SlowStart: true, Probe: probe}, sched.DefaultSlowStartFrom, true},
		{"slow start below", sched.GateConfig{Limit: 4, SlowStart: true}, 4, true},
		{"fixed", sched.GateConfig{Limit: 64, Declared: 16, Fixed: true, SlowStart: true}, 64, true},
		{"set initial", sched.GateConfig{Limit: 64, Initial: 32, SlowStart: true}, 32, true},
		{"rate", sched.GateConfig{RPM: 60}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.cfg.Limits(); got != c.wantLimits {
				t.Errorf("Limits() = %v, want %v", got, c.wantLimits)
			}
			if got := newGate(t, c.cfg).Stats().Limit; got != c.wantLimit {
				t.Errorf("limit = %d, want %d", got, c.wantLimit)
			}
		})
	}
}

// TestGateOutputDebt: the output-token limit a backend reports is learnt,
// and a call's output is spent before its slot is freed, so that the call
// waiting for that slot goes only once the output is paid for; without an
// output limit, outputs delay nothing.
func TestGateOutputDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 1, Fixed: true})
		start := time.Now()
		first := admit(t, g)
		admitted := make(chan time.Duration, 1)
		go func() {
			tk := admit(t, g)
			admitted <- time.Since(start)
			tk.Release(sched.Outcome{})
		}()
		synctest.Wait() // the second call waits for the slot
		// 60,000 output tokens a minute (1000/s); the answer used 12,000.
		first.Release(sched.Outcome{OutputTokens: 12_000, LimitOutputTokens: 60_000, RemainingOutputTokens: 48_000})
		if got := <-admitted; got < 12*time.Second || got > 12010*time.Millisecond {
			t.Errorf("the call waiting for the slot of a 12,000-token answer was admitted after %v, want 12s (its refill at 60,000 a minute)", got)
		}
		if got := g.Stats(); got.OTPM != 60_000 || got.RPM != 0 || got.TPM != 0 {
			t.Errorf("Stats() rates = %d rpm %d tpm %d otpm, want only the reported 60000 otpm", got.RPM, got.TPM, got.OTPM)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 1, Fixed: true, RPM: 6000})
		start := time.Now()
		for range 10 {
			admit(t, g).Release(sched.Outcome{OutputTokens: 100_000, LimitRequests: 6000, RemainingRequests: 5000})
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("ten long answers without an output limit took %v, want 0", got)
		}
		if got := g.Stats().OTPM; got != 0 {
			t.Errorf("Stats().OTPM with none configured nor reported = %d, want 0", got)
		}
	})
}
