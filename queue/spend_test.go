package queue_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/queue"
)

// TestSpendLedgerNeverOverReserves checks the shared spend cap: 40
// concurrent reservations of $1 under a $10 cap, from two clients, reserve
// exactly 10 and ask the rest to wait; once those settle at $1 each, a
// reservation is refused and the ledger says the cap is reached, for
// every client; Reopen lets a higher cap reserve again.
func TestSpendLedgerNeverOverReserves(t *testing.T) {
	c, _ := open(t)
	a, b := c.SpendLedger("run1"), c.SpendLedger("run1")
	var reserved, waiting atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			v, _, err := l.Reserve(t.Context(), 10, 1)
			switch {
			case err != nil:
				t.Error(err)
			case v == queue.SpendReserved:
				reserved.Add(1)
			case v == queue.SpendWait:
				waiting.Add(1)
			default:
				t.Errorf("verdict %v before anything was spent", v)
			}
		})
	}
	wg.Wait()
	if reserved.Load() != 10 || waiting.Load() != 30 {
		t.Fatalf("%d reserved, %d asked to wait; want 10, 30", reserved.Load(), waiting.Load())
	}
	for range 10 {
		if err := a.Settle(t.Context(), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	v, spent, err := b.Reserve(t.Context(), 10, 0.5)
	if err != nil || v != queue.SpendRefused || spent != 10 {
		t.Fatalf("Reserve at the cap = %v, $%v, %v; want refused, $10", v, spent, err)
	}
	st, err := a.State(t.Context())
	if err != nil || !st.Reached || st.Spent != 10 || st.Reserved != 0 {
		t.Fatalf("State = %+v, %v; want reached, $10 spent, $0 reserved", st, err)
	}
	// Refused once, every later call is, even one that would fit.
	if v, _, _ := a.Reserve(t.Context(), 100, 0.5); v != queue.SpendRefused {
		t.Errorf("Reserve after a refusal = %v, want refused", v)
	}
	if err := a.Reopen(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := a.Reserve(t.Context(), 100, 0.5); v != queue.SpendReserved {
		t.Errorf("Reserve after Reopen under a higher cap = %v, want reserved", v)
	}
}

// TestSpendLedgerReopenSetsLimit: the limit of Reopen holds every
// worker's reservations, whatever limit they pass (a worker that opened
// the run's job under its first cap passes that one), and the spend from
// before is kept.
func TestSpendLedgerReopenSetsLimit(t *testing.T) {
	c, _ := open(t)
	l := c.SpendLedger("run-reopen")
	if v, _, err := l.Reserve(t.Context(), 10, 8); err != nil || v != queue.SpendReserved {
		t.Fatalf("Reserve = %v, %v; want reserved", v, err)
	}
	if err := l.Settle(t.Context(), 8, 8); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := l.Reserve(t.Context(), 10, 5); v != queue.SpendRefused {
		t.Fatalf("Reserve past $10 = %v, want refused", v)
	}
	if err := l.Reopen(t.Context(), 20); err != nil {
		t.Fatal(err)
	}
	// A worker still holding the $10 cap of the first start.
	v, spent, err := l.Reserve(t.Context(), 10, 5)
	if err != nil || v != queue.SpendReserved || spent != 8 {
		t.Fatalf("Reserve of $5 under the stale $10 after Reopen($20) = %v, $%v, %v; want reserved, $8 spent kept", v, spent, err)
	}
	if v, _, _ := l.Reserve(t.Context(), 1000, 10); v != queue.SpendWait {
		t.Errorf("Reserve of $10 passing Reopen's $20 with a worker's $1000 = %v, want wait (13 + 10 > 20, 8 + 10 ≤ 20)", v)
	}
	st, err := l.State(t.Context())
	if err != nil || st.Limit != 20 || st.Spent != 8 || st.Reserved != 5 {
		t.Errorf("State = %+v, %v; want limit 20, $8 spent, $5 reserved", st, err)
	}
}

// TestSpendLedgerWatch: the watch does not stop a run while a call is
// refused but another's reservation is still in flight; once that
// settles, it cancels its context and stop reports the cap with the
// spend. A watch stopped before the cap reports no cap.
func TestSpendLedgerWatch(t *testing.T) {
	c, _ := open(t)
	l := c.SpendLedger("run-watch")

	ctx, stop := l.Watch(t.Context())
	if capped, _ := stop(); capped || ctx.Err() == nil {
		t.Fatalf("a watch stopped at once: capped %v, context %v; want no cap, context canceled", capped, ctx.Err())
	}

	if v, _, err := l.Reserve(t.Context(), 10, 9); err != nil || v != queue.SpendReserved {
		t.Fatalf("Reserve = %v, %v", v, err)
	}
	if v, _, _ := l.Reserve(t.Context(), 10, 5); v != queue.SpendWait {
		t.Fatalf("Reserve over the cap with $9 in flight = %v, want wait", v)
	}
	ctx, stop = l.Watch(t.Context())
	if err := l.Settle(t.Context(), 9, 9.5); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := l.Reserve(t.Context(), 10, 1); v != queue.SpendRefused {
		t.Fatalf("Reserve past the cap = %v, want refused", v)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * queue.SpendWatchEvery):
		t.Fatal("the watch's context is not canceled once the cap is reached with nothing in flight")
	}
	capped, st := stop()
	if !capped || !st.Reached || st.Spent != 9.5 || st.Reserved != 0 {
		t.Errorf("stop = %v, %+v; want capped, reached, $9.5 spent, nothing reserved", capped, st)
	}
}
