package queue_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/queue"
)

// TestRelease: a released task is read at once by another worker, with
// the same run, index and input under a new entry ID, and the original is
// no longer pending (no reclaim finds it); releasing it again, or a task
// acknowledged meanwhile, changes nothing.
func TestRelease(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r1")
	enqueue(t, c, "r1", 0, 2)
	held, err := c.Read(ctx, "w1", 2, 0)
	if err != nil || len(held) != 2 {
		t.Fatalf("Read = %v, %v; want 2 tasks", held, err)
	}
	if err := c.Release(ctx, "w1", held[0]); err != nil {
		t.Fatalf("Release = %v", err)
	}
	got, err := c.Read(ctx, "w2", 10, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("Read after Release = %v, %v; want the released task", got, err)
	}
	want := queue.Task{ID: got[0].ID, Run: "r1", Index: 0, Input: []byte(`{"i":0}`)}
	if diff := cmp.Diff(want, got[0]); diff != "" || got[0].ID == held[0].ID {
		t.Errorf("released task (-want +got):\n%s\nID %s, original %s: want a new ID", diff, got[0].ID, held[0].ID)
	}
	// Only w1's other task and w2's new one are pending.
	re, err := c.Reclaim(ctx, "w3", 0, 10)
	if err != nil {
		t.Fatalf("Reclaim = %v", err)
	}
	var idx []int
	for _, tk := range re {
		idx = append(idx, tk.Index)
		if tk.ID == held[0].ID {
			t.Errorf("the released original %s is still pending", tk.ID)
		}
	}
	if len(idx) != 2 {
		t.Errorf("Reclaim after Release = indexes %v, want 2 tasks (1 and the released 0)", idx)
	}
	// Released or acknowledged already: nothing is added.
	if err := c.Release(ctx, "w1", held[0]); err != nil {
		t.Fatalf("Release again = %v", err)
	}
	if err := c.Ack(ctx, held[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, "w1", held[1]); err != nil {
		t.Fatalf("Release of an acknowledged task = %v", err)
	}
	if more, err := c.Read(ctx, "w4", 10, 0); err != nil || len(more) != 0 {
		t.Errorf("Read = %v, %v; want nothing new", more, err)
	}
}

// TestReleaseOfReclaimedTask: a worker that lost its task to another's
// Reclaim (it went silent past the visibility timeout) cannot release it:
// the task stays with the worker that reclaimed it, and no copy is added
// for a third worker to run beside it.
func TestReleaseOfReclaimedTask(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r1")
	enqueue(t, c, "r1", 0, 1)
	held, err := c.Read(ctx, "a", 1, 0)
	if err != nil || len(held) != 1 {
		t.Fatalf("Read = %v, %v", held, err)
	}
	re, err := c.Reclaim(ctx, "b", 0, 10)
	if err != nil || len(re) != 1 {
		t.Fatalf("Reclaim by b = %v, %v; want a's task", re, err)
	}
	if err := c.Release(ctx, "a", held[0]); err != nil {
		t.Fatalf("Release by a = %v", err)
	}
	if more, err := c.Read(ctx, "c", 10, 0); err != nil || len(more) != 0 {
		t.Errorf("Read by c = %v, %v; want nothing: b runs the task", more, err)
	}
	again, err := c.Reclaim(ctx, "b", 0, 10)
	if err != nil || len(again) != 1 || again[0].ID != held[0].ID {
		t.Errorf("b's pending tasks = %v, %v; want the original still held", again, err)
	}
}
