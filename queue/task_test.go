package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/queue"
)

func TestEnqueueReadAck(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r1")
	enqueue(t, c, "r1", 0, 3)

	tasks, err := c.Read(ctx, "w1", 10, 0)
	if err != nil {
		t.Fatalf("Read = %v", err)
	}
	var got []string
	for _, tk := range tasks {
		if tk.Run != "r1" || tk.ID == "" {
			t.Errorf("task %+v, want run r1 with an ID", tk)
		}
		got = append(got, fmt.Sprintf("%d %s", tk.Index, tk.Input))
	}
	if diff := cmp.Diff([]string{`0 {"i":0}`, `1 {"i":1}`, `2 {"i":2}`}, got); diff != "" {
		t.Fatalf("Read tasks (-want +got):\n%s", diff)
	}
	st, err := c.RunStatus(ctx, "r1")
	if err != nil || st.Enqueued != 3 {
		t.Fatalf("RunStatus = %+v, %v; want Enqueued 3", st, err)
	}

	// Nothing new: Read returns none, at once or after blocking.
	if more, err := c.Read(ctx, "w2", 10, 0); err != nil || len(more) != 0 {
		t.Fatalf("Read again = %v, %v; want none", more, err)
	}
	if more, err := c.Read(ctx, "w2", 10, 20*time.Millisecond); err != nil || len(more) != 0 {
		t.Fatalf("Read blocking = %v, %v; want none", more, err)
	}

	// Acked tasks are gone: not reclaimable even when idle.
	for _, tk := range tasks[:2] {
		if err := c.Ack(ctx, tk); err != nil {
			t.Fatalf("Ack(%s) = %v", tk.ID, err)
		}
	}
	re, err := c.Reclaim(ctx, "w2", 0, 10)
	if err != nil {
		t.Fatalf("Reclaim = %v", err)
	}
	if len(re) != 1 || re[0].Index != 2 {
		t.Fatalf("Reclaim = %+v, want only the unacked task 2", re)
	}
}

func TestReadBlocksUntilEnqueued(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	got := make(chan []queue.Task, 1)
	errc := make(chan error, 1)
	go func() { // owned by the test: it waits on got or errc
		tasks, err := c.Read(ctx, "w", 1, 10*time.Second)
		errc <- err
		got <- tasks
	}()
	// The reader may block before or after this Enqueue: it gets the task
	// either way.
	enqueue(t, c, "r", 0, 1)
	if err := <-errc; err != nil {
		t.Fatalf("Read = %v", err)
	}
	if tasks := <-got; len(tasks) != 1 || tasks[0].Index != 0 {
		t.Fatalf("Read = %+v, want task 0", tasks)
	}
}

func TestEnqueueRefusesWrongIndex(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	enqueue(t, c, "r", 0, 2)
	for _, idx := range []int{0, 1, 3, -1} {
		if err := c.Enqueue(ctx, "r", idx, []byte(`{}`)); err == nil {
			t.Errorf("Enqueue(index %d) after 2 = nil, want an error", idx)
		}
	}
	if err := c.Enqueue(ctx, "r", 2, []byte(`{not json`)); err == nil {
		t.Errorf("Enqueue(invalid JSON) = nil, want an error")
	}
	if err := c.Enqueue(ctx, "nope", 0, []byte(`{}`)); !errors.Is(err, queue.ErrNoRun) {
		t.Errorf("Enqueue(unknown run) = %v, want ErrNoRun", err)
	}
	st, err := c.RunStatus(ctx, "r")
	if err != nil || st.Enqueued != 2 {
		t.Fatalf("RunStatus = %+v, %v; want Enqueued still 2", st, err)
	}
	tasks, err := c.Read(ctx, "w", 10, 0)
	if err != nil || len(tasks) != 2 {
		t.Fatalf("Read = %d tasks, %v; want the 2 enqueued ones only", len(tasks), err)
	}
}

func TestConcurrentReadersGetDistinctTasks(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	const n = 200
	enqueue(t, c, "r", 0, n)

	var mu sync.Mutex // protects seen and dups
	seen := map[int]string{}
	var dups []string
	var wg sync.WaitGroup
	errs := make(chan error, 4) // one per reader at most
	for w := range 4 {
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				tasks, err := c.Read(ctx, worker, 7, 0)
				if err != nil {
					errs <- err
					return
				}
				if len(tasks) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range tasks {
					if other, ok := seen[tk.Index]; ok {
						dups = append(dups, fmt.Sprintf("task %d read by %s and %s", tk.Index, other, worker))
					}
					seen[tk.Index] = worker
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, d := range dups {
		t.Error(d)
	}
	if len(seen) != n {
		t.Errorf("read %d distinct tasks, want %d", len(seen), n)
	}
}

func TestReclaimAfterIdleTouchKeeps(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	enqueue(t, c, "r", 0, 4)
	tasks, err := c.Read(ctx, "dead", 2, 0) // tasks 0, 1: never touched
	if err != nil || len(tasks) != 2 {
		t.Fatalf("Read(dead) = %d, %v", len(tasks), err)
	}
	live, err := c.Read(ctx, "live", 2, 0) // tasks 2, 3: touched
	if err != nil || len(live) != 2 {
		t.Fatalf("Read(live) = %d, %v", len(live), err)
	}
	const minIdle = 500 * time.Millisecond

	// Before minIdle nothing is reclaimed.
	if re, err := c.Reclaim(ctx, "thief", minIdle, 10); err != nil || len(re) != 0 {
		t.Fatalf("Reclaim before minIdle = %+v, %v; want none", re, err)
	}
	// live touches its tasks every 50ms while minIdle passes twice over;
	// it also touches task 0, which it does not hold: that must not move it.
	ids := []string{live[0].ID, live[1].ID, tasks[0].ID}
	deadline := time.Now().Add(2 * minIdle)
	for time.Now().Before(deadline) {
		if err := c.Touch(ctx, "live", ids); err != nil {
			t.Fatalf("Touch = %v", err)
		}
		time.Sleep(50 * time.Millisecond) // a worker's touch period, not a timing assertion
	}
	re, err := c.Reclaim(ctx, "thief", minIdle, 10)
	if err != nil {
		t.Fatalf("Reclaim = %v", err)
	}
	var idx []int
	for _, tk := range re {
		idx = append(idx, tk.Index)
		if string(tk.Input) != fmt.Sprintf(`{"i":%d}`, tk.Index) {
			t.Errorf("reclaimed task %d input %s", tk.Index, tk.Input)
		}
	}
	slices.Sort(idx)
	if diff := cmp.Diff([]int{0, 1}, idx); diff != "" {
		t.Fatalf("Reclaim took (-want +got):\n%s", diff)
	}
	// The thief now holds 0 and 1: dead's touch leaves them alone, and a
	// second reclaim right away finds nothing idle.
	if err := c.Touch(ctx, "dead", []string{tasks[0].ID, tasks[1].ID}); err != nil {
		t.Fatalf("Touch(dead) = %v", err)
	}
	if re, err := c.Reclaim(ctx, "other", minIdle, 10); err != nil || len(re) != 0 {
		t.Fatalf("Reclaim right after = %+v, %v; want none", re, err)
	}
	// Reclaim takes no more than max.
	time.Sleep(minIdle + 50*time.Millisecond) // let every task go idle
	re, err = c.Reclaim(ctx, "other", minIdle, 3)
	if err != nil || len(re) != 3 {
		t.Fatalf("Reclaim(max 3) = %d tasks, %v; want 3", len(re), err)
	}
}

func TestTaskInputRoundTrip(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	in := json.RawMessage(`{"big":12345678901234567890123,"f":1e999,"s":"é\n\"","a":[1,{"b":null}]}`)
	if err := c.Enqueue(ctx, "r", 0, in); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Read(ctx, "w", 1, 0)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("Read = %v, %v", tasks, err)
	}
	if string(tasks[0].Input) != string(in) {
		t.Errorf("Input = %s, want %s", tasks[0].Input, in)
	}
}

// TestGroupRecreated: when the task stream is lost (deleted, Redis
// flushed), the next calls recreate it and its group.
func TestGroupRecreated(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	enqueue(t, c, "r", 0, 1)
	if tasks, err := c.Read(ctx, "w", 1, 0); err != nil || len(tasks) != 1 {
		t.Fatalf("Read = %v, %v", tasks, err)
	}
	if err := c.Redis().Del(ctx, c.Key("tasks")).Err(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Reclaim": func() error { _, err := c.Reclaim(ctx, "w", 0, 1); return err },
		"Touch":   func() error { return c.Touch(ctx, "w", []string{"1-1"}) },
	} {
		if err := call(); err != nil {
			t.Errorf("%s after the stream was deleted = %v, want nil", name, err)
		}
	}
	if err := c.Redis().Del(ctx, c.Key("tasks")).Err(); err != nil {
		t.Fatal(err)
	}
	enqueue(t, c, "r", 1, 1) // recreates the stream, without the group
	tasks, err := c.Read(ctx, "w", 1, 0)
	if err != nil || len(tasks) != 1 || tasks[0].Index != 1 {
		t.Fatalf("Read after the stream was recreated = %+v, %v; want task 1", tasks, err)
	}
}
