package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/queue"
)

// simJob returns an Open that runs each run's inputs on the simulator,
// answering after latency, and counts the jobs opened and closed.
func simJob(t *testing.T, latency time.Duration, opened, closed *atomic.Int64) func(context.Context, queue.RunStatus) (queue.Job, error) {
	t.Helper()
	return func(_ context.Context, st queue.RunStatus) (queue.Job, error) {
		model, err := sim.New(sim.Config{Latency: latency, Seed: 1})
		if err != nil {
			return queue.Job{}, err
		}
		spec, err := batchagent.NewSpec(batchagent.Def{ID: st.ID, Model: model, Task: "Describe item {i}."})
		if err != nil {
			return queue.Job{}, err
		}
		opened.Add(1)
		return queue.Job{Spec: spec, Close: func() error { closed.Add(1); return nil }}, nil
	}
}

// startWorker runs a worker of cfg until the returned stop is called; stop
// returns Run's error.
func startWorker(t *testing.T, cfg queue.WorkerConfig) (*queue.Worker, func() error) {
	t.Helper()
	w, err := queue.NewWorker(cfg)
	if err != nil {
		t.Fatalf("NewWorker = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of its context's end")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return w, stop
}

// done returns run's Done.
func done(t *testing.T, c *queue.Client, run string) int {
	t.Helper()
	st, err := c.RunStatus(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	return st.Done
}

// TestWorkerRunsTasks: a worker runs every task of a run once, records
// each result and acks its task, drops a placeholder (null) without a
// result, opens the run's job once, and on stopping closes it and leaves
// the workers' list.
func TestWorkerRunsTasks(t *testing.T) {
	const n = 20
	c, _ := open(t)
	createRun(t, c, "r")
	enqueue(t, c, "r", 0, n)
	if err := c.Enqueue(t.Context(), "r", n, json.RawMessage("null")); err != nil {
		t.Fatal(err)
	}
	var opened, closed atomic.Int64
	w, stop := startWorker(t, queue.WorkerConfig{Client: c, ID: "w1", MaxActive: 4, Visibility: 3 * time.Second,
		Open: simJob(t, 10*time.Millisecond, &opened, &closed)})
	waitUntil(t, 30*time.Second, "every result recorded", func() bool { return done(t, c, "r") >= n })
	waitUntil(t, 5*time.Second, "the worker listed", func() bool {
		ws, err := c.Workers(t.Context())
		return err == nil && len(ws) == 1 && ws[0].ID == "w1" && ws[0].Alive
	})
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	for i := range n {
		line, ok, err := c.Result(t.Context(), "r", i)
		var l struct {
			Index int             `json:"index"`
			Error json.RawMessage `json:"error"`
		}
		if err != nil || !ok || json.Unmarshal(line, &l) != nil || l.Index != i || l.Error != nil {
			t.Errorf("result %d = %s, %v, %v; want a success line of index %d", i, line, ok, err, i)
		}
	}
	if _, ok, _ := c.Result(t.Context(), "r", n); ok {
		t.Errorf("the placeholder %d has a result, want none", n)
	}
	if got := done(t, c, "r"); got != n {
		t.Errorf("Done = %d, want %d", got, n)
	}
	if st := w.Stats(); st != (queue.WorkerStats{Recorded: n}) {
		t.Errorf("Stats = %+v, want %d recorded, nothing released", st, n)
	}
	if opened.Load() != 1 || closed.Load() != 1 {
		t.Errorf("job opened %d, closed %d times; want once each", opened.Load(), closed.Load())
	}
	if left, err := c.Reclaim(t.Context(), "other", 0, 100); err != nil || len(left) != 0 {
		t.Errorf("tasks left pending = %v, %v; want none: every task acked", left, err)
	}
	if ws, err := c.Workers(t.Context()); err != nil || len(ws) != 0 {
		t.Errorf("workers after Run = %+v, %v; want none: it left", ws, err)
	}
}

// TestWorkerStopReleasesUnfinished: a worker stopped with no grace while
// its agents wait on the model stops at once, records nothing, and
// releases its tasks, which another worker reads at once.
func TestWorkerStopReleasesUnfinished(t *testing.T) {
	const n = 3
	c, _ := open(t)
	createRun(t, c, "slow")
	enqueue(t, c, "slow", 0, n)
	var opened, closed atomic.Int64
	w, stop := startWorker(t, queue.WorkerConfig{Client: c, ID: "w1", Visibility: 3 * time.Second,
		Open: simJob(t, time.Hour, &opened, &closed)})
	waitUntil(t, 10*time.Second, "every task held", func() bool {
		ws, err := c.Workers(t.Context())
		return err == nil && len(ws) == 1 && ws[0].Held == n
	})
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("Run returned %v after its context ended, want promptly (no grace)", took)
	}
	if st := w.Stats(); st != (queue.WorkerStats{Released: n}) {
		t.Errorf("Stats = %+v, want %d released, nothing recorded", st, n)
	}
	got, err := c.Read(t.Context(), "w2", 10, 0)
	if err != nil || len(got) != n {
		t.Errorf("another worker's Read = %d tasks, %v; want the %d released", len(got), err, n)
	}
	if done(t, c, "slow") != 0 {
		t.Errorf("Done = %d, want 0", done(t, c, "slow"))
	}
}

// TestWorkerGraceRecordsWhatFinishes: a worker stopped with a grace longer
// than its agents' turns lets them finish and records their results.
func TestWorkerGraceRecordsWhatFinishes(t *testing.T) {
	const n = 3
	c, _ := open(t)
	createRun(t, c, "g")
	enqueue(t, c, "g", 0, n)
	var opened, closed atomic.Int64
	w, stop := startWorker(t, queue.WorkerConfig{Client: c, ID: "w1", Visibility: 3 * time.Second, Grace: time.Minute,
		Open: simJob(t, time.Second, &opened, &closed)})
	waitUntil(t, 10*time.Second, "every task held", func() bool {
		ws, err := c.Workers(t.Context())
		return err == nil && len(ws) == 1 && ws[0].Held == n
	})
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if st := w.Stats(); st != (queue.WorkerStats{Recorded: n}) {
		t.Errorf("Stats = %+v, want %d recorded in the grace, nothing released", st, n)
	}
	if got := done(t, c, "g"); got != n {
		t.Errorf("Done = %d, want %d", got, n)
	}
}

// TestWorkerReclaimsAndTouches: a worker reclaims the task of a worker
// that went silent once it is idle for the visibility timeout; while it
// runs that agent (longer than the timeout) it touches the task, so a
// third worker reclaiming all along takes nothing.
func TestWorkerReclaimsAndTouches(t *testing.T) {
	c, _ := open(t)
	createRun(t, c, "rc")
	enqueue(t, c, "rc", 0, 1)
	if got, err := c.Read(t.Context(), "dead", 1, 0); err != nil || len(got) != 1 {
		t.Fatalf("the dead worker's Read = %v, %v; want its one task", got, err)
	}
	var opened, closed atomic.Int64
	w, stop := startWorker(t, queue.WorkerConfig{Client: c, ID: "live", Visibility: time.Second,
		Open: simJob(t, 3*time.Second, &opened, &closed)})
	waitUntil(t, 10*time.Second, "the live worker holding the task", func() bool {
		ws, err := c.Workers(t.Context())
		return err == nil && len(ws) == 1 && ws[0].Held == 1
	})
	stolen := 0
	for done(t, c, "rc") == 0 {
		got, err := c.Reclaim(t.Context(), "thief", time.Second, 10)
		if err != nil {
			t.Fatal(err)
		}
		stolen += len(got)
		time.Sleep(100 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if stolen != 0 || w.Stats().Recorded != 1 {
		t.Errorf("thief reclaimed %d tasks, the live worker recorded %d; want 0 and 1", stolen, w.Stats().Recorded)
	}
}

// TestNewWorkerChecks: a config without Client or Open, or with values
// out of range, is refused; defaults fill the rest.
func TestNewWorkerChecks(t *testing.T) {
	c, _ := open(t)
	open := func(context.Context, queue.RunStatus) (queue.Job, error) { return queue.Job{}, errors.New("none") }
	for _, cfg := range []queue.WorkerConfig{
		{Open: open},
		{Client: c},
		{Client: c, Open: open, MaxActive: -1},
		{Client: c, Open: open, Visibility: time.Millisecond},
		{Client: c, Open: open, Grace: -time.Second},
	} {
		if _, err := queue.NewWorker(cfg); err == nil {
			t.Errorf("NewWorker(%+v) = nil error, want one", cfg)
		}
	}
	w, err := queue.NewWorker(queue.WorkerConfig{Client: c, Open: open})
	if err != nil || w.ID() == "" {
		t.Errorf("NewWorker with defaults = %v, ID %q; want a worker named HOST-PID", err, w.ID())
	}
}
