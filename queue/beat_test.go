package queue_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchagent/batchagent/queue"
)

func TestWorkersBeatExpireLeave(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	before := time.Now().Add(-time.Second)
	if err := c.Beat(ctx, "w2", 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Beat(ctx, "w1", 5, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.Beat(ctx, "w3", 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Beat(ctx, "w3", 1, 0); err == nil {
		t.Fatalf("Beat(ttl 0) = nil, want an error")
	}
	if err := c.Leave(ctx, "w3"); err != nil {
		t.Fatal(err)
	}
	// w1's heartbeat expires after 100ms; poll rather than sleep a guess.
	var ws []queue.WorkerStatus
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if ws, err = c.Workers(ctx); err != nil {
			t.Fatal(err)
		}
		if len(ws) == 2 && !ws[0].Alive || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range ws {
		if w.Beat.Before(before) || w.Beat.After(time.Now()) {
			t.Errorf("worker %s beat %v, want about now", w.ID, w.Beat)
		}
	}
	want := []queue.WorkerStatus{{ID: "w1", Held: 5, Alive: false}, {ID: "w2", Held: 3, Alive: true}}
	if diff := cmp.Diff(want, ws, cmpopts.IgnoreFields(queue.WorkerStatus{}, "Beat")); diff != "" {
		t.Fatalf("Workers (-want +got):\n%s", diff)
	}
}

func TestWorkersForgetsLongDead(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	if err := c.Beat(ctx, "live", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A worker whose last beat is older than ForgetAfter and whose key has
	// expired, written as Beat writes it.
	old := time.Now().Add(-queue.ForgetAfter - time.Minute).UnixMilli()
	if err := c.Redis().HSet(ctx, c.Key("workers"), "old", `{"held":2,"beat":`+strconv.FormatInt(old, 10)+`}`).Err(); err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != "live" {
		t.Fatalf("Workers = %+v, %v; want only live", ws, err)
	}
	if n, err := c.Redis().HLen(ctx, c.Key("workers")).Result(); err != nil || n != 1 {
		t.Fatalf("workers hash has %d entries, %v; want the dead one forgotten", n, err)
	}
}
