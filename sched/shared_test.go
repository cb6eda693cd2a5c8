package sched_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/batchagent/batchagent/sched"
	"github.com/google/go-cmp/cmp"
)

// fakeShared is a sched.Shared that records what the gate asks of it and
// fails Wait with err when set.
type fakeShared struct {
	err error

	mu       sync.Mutex // protects the fields below
	waits    []int
	corrects [][2]int
}

func (f *fakeShared) Wait(ctx context.Context, tokens int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, tokens)
	return f.err
}

func (f *fakeShared) Correct(ctx context.Context, estimated, actual int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.corrects = append(f.corrects, [2]int{estimated, actual})
}

// TestGateShared checks that a gate with a shared budget counts tokens
// without a local budget, waits on the shared budget with each call's
// estimate, and corrects it with the usage each call reports.
func TestGateShared(t *testing.T) {
	sh := &fakeShared{}
	g := newGate(t, sched.GateConfig{Limit: 4, Shared: sh})
	if !g.CountsTokens() {
		t.Error("CountsTokens() with a shared budget = false, want true")
	}
	for i, o := range []sched.Outcome{{Tokens: 250}, {}, {Tokens: 90}} {
		tk, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 100*(i+1))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		tk.Release(o)
	}
	if diff := cmp.Diff([]int{100, 200, 300}, sh.waits); diff != "" {
		t.Errorf("Shared.Wait tokens (-want +got):\n%s", diff)
	}
	// The call without usage leaves its estimate standing.
	if diff := cmp.Diff([][2]int{{100, 250}, {300, 90}}, sh.corrects); diff != "" {
		t.Errorf("Shared.Correct (estimated, actual) (-want +got):\n%s", diff)
	}
}

// TestGateSharedError checks that a failing shared budget fails Acquire
// with its error, holding nothing, and lets warming callers go.
func TestGateSharedError(t *testing.T) {
	down := errors.New("shared budget down")
	sh := &fakeShared{err: down}
	g := newGate(t, sched.GateConfig{Limit: 1, Warm: true, Shared: sh})
	for range 2 { // the second would wait for the warm-up forever if the first held it
		if _, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 10); !errors.Is(err, down) {
			t.Fatalf("Acquire with a failing shared budget = %v, want %v", err, down)
		}
	}
	if got := g.Stats(); got.Inflight != 0 {
		t.Errorf("Stats().Inflight after failed acquires = %d, want 0", got.Inflight)
	}
}

// fakeSlots is a sched.SharedSlots of n slots in memory that records the
// outcomes it is given.
type fakeSlots struct {
	err error

	mu       sync.Mutex // protects the fields below
	n, held  int
	leases   int
	outcomes []string
}

func (f *fakeSlots) Acquire(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	if f.held == f.n {
		return "", errors.New("fakeSlots: full (the test expects no wait)")
	}
	f.held++
	f.leases++
	return fmt.Sprint("lease", f.leases), nil
}

func (f *fakeSlots) Release(ctx context.Context, lease string, clean, congested bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held--
	f.outcomes = append(f.outcomes, fmt.Sprintf("%s clean=%v congested=%v", lease, clean, congested))
}

// TestGateSharedSlots checks that an admitted call holds a shared slot
// until its release, which reports its outcome, and that a failing shared
// limit fails Acquire holding nothing.
func TestGateSharedSlots(t *testing.T) {
	sl := &fakeSlots{n: 2}
	g := newGate(t, sched.GateConfig{Limit: 4, SharedSlots: sl})
	a, b := admit(t, g), admit(t, g)
	if sl.held != 2 {
		t.Errorf("shared slots held with 2 calls admitted = %d, want 2", sl.held)
	}
	a.Release(sched.Outcome{})
	b.Release(sched.Outcome{Signal: sched.SignalCongested})
	admit(t, g).Release(sched.Outcome{Signal: sched.SignalFailed})
	want := []string{"lease1 clean=true congested=false", "lease2 clean=false congested=true", "lease3 clean=false congested=false"}
	if diff := cmp.Diff(want, sl.outcomes); diff != "" {
		t.Errorf("shared slot releases (-want +got):\n%s", diff)
	}
	sl.err = errors.New("shared limit down")
	if _, err := g.Acquire(t.Context(), sched.Batch, 0, 0, 0); !errors.Is(err, sl.err) {
		t.Errorf("Acquire with a failing shared limit = %v, want %v", err, sl.err)
	}
	if st := g.Stats(); st.Inflight != 0 {
		t.Errorf("Stats().Inflight after a failed acquire = %d, want 0", st.Inflight)
	}
}

// blockingShared is a sched.Shared whose Wait lasts until its context
// ends: a budget other processes keep spent.
type blockingShared struct{}

func (blockingShared) Wait(ctx context.Context, tokens int) error {
	<-ctx.Done()
	return ctx.Err()
}

func (blockingShared) Correct(ctx context.Context, estimated, actual int) {}

// TestGateSharedWaitEndsOnStop: a call waiting for a shared budget that
// other processes keep spent stops with ErrStopped once the gate's owner
// drains, as its other long waits do, instead of waiting out its context.
func TestGateSharedWaitEndsOnStop(t *testing.T) {
	stop := make(chan struct{})
	g := newGate(t, sched.GateConfig{Limit: 1, Shared: blockingShared{}, Stop: stop})
	done := make(chan error, 1)
	go func() {
		_, err := g.Acquire(context.Background(), sched.Batch, 0, 0, 1)
		done <- err
	}()
	close(stop)
	if err := <-done; !errors.Is(err, sched.ErrStopped) {
		t.Errorf("Acquire after Stop = %v, want ErrStopped", err)
	}
}
