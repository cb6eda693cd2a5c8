package queue_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/queue"
)

// collector is a Coordinator's Sink that keeps what it is handed.
type collector struct {
	mu    sync.Mutex
	lines map[int]int // index → times handed
	warns []string
}

func (c *collector) sink(batch []queue.Collected) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range batch {
		c.lines[r.Index]++
	}
	return nil
}

func (c *collector) warn(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns = append(c.warns, msg)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lines)
}

// inputs returns n inputs {"i": k}.
func inputs(n int) func() (batchagent.Inputs, error) {
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"i": i}
	}
	return func() (batchagent.Inputs, error) { return batchagent.Slice(in), nil }
}

// TestCoordinatorWithWorker: a coordinator and a worker in one process
// run every input once; the coordinator's stats count them.
func TestCoordinatorWithWorker(t *testing.T) {
	const n = 25
	c, _ := open(t)
	var opened, closed atomic.Int64
	startWorker(t, queue.WorkerConfig{Client: c, ID: "w", MaxActive: 8, Visibility: 3 * time.Second,
		Open: simJob(t, 10*time.Millisecond, &opened, &closed)})
	col := &collector{lines: map[int]int{}}
	var progress atomic.Int64
	co, err := queue.NewCoordinator(queue.CoordinatorConfig{Client: c, Run: queue.Run{ID: "cw", Job: []byte("x")},
		Window: 5, Inputs: inputs(n), Sink: col.sink, Warn: col.warn,
		Progress: func(queue.CoordinatorStats) { progress.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	st := co.Stats()
	if col.count() != n || st.Written != n || st.OK != n || st.Failed != 0 || st.Enqueued != n || st.Total != n {
		t.Errorf("sink got %d indexes; stats %+v; want %d each, all ok", col.count(), st, n)
	}
	for i, k := range col.lines {
		if k != 1 {
			t.Errorf("index %d handed %d times, want once", i, k)
		}
	}
	if progress.Load() < 1 {
		t.Error("Progress never called, want at least once (at the start)")
	}
}

// TestCoordinatorRunLost: a run that Redis loses while the coordinator
// waits on its window (FLUSHALL) is registered again, and its inputs
// without a result enqueued anew; every input reaches the sink once.
func TestCoordinatorRunLost(t *testing.T) {
	const n = 40
	c, _ := open(t)
	col := &collector{lines: map[int]int{}}
	co, err := queue.NewCoordinator(queue.CoordinatorConfig{Client: c, Run: queue.Run{ID: "lost", Job: []byte("x")},
		Window: 4, Inputs: inputs(n), Sink: col.sink, Warn: col.warn})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	waitUntil(t, 10*time.Second, "the window enqueued", func() bool {
		st, err := c.RunStatus(t.Context(), "lost")
		return err == nil && st.Enqueued == 4
	})
	if err := c.Redis().FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the run registered again", func() bool {
		st, err := c.RunStatus(t.Context(), "lost")
		return err == nil && st.Enqueued > 0
	})
	var opened, closed atomic.Int64
	startWorker(t, queue.WorkerConfig{Client: c, ID: "w", Visibility: 3 * time.Second,
		Open: simJob(t, time.Millisecond, &opened, &closed)})
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if col.count() != n {
		t.Errorf("sink got %d indexes, want %d", col.count(), n)
	}
	for i, k := range col.lines {
		if k != 1 {
			t.Errorf("index %d handed %d times, want once", i, k)
		}
	}
	if !strings.Contains(strings.Join(col.warns, "\n"), "is gone from Redis") {
		t.Errorf("warnings %q, want one saying the run is gone from Redis", col.warns)
	}
}
