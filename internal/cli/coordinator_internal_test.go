package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/redistest"
	"github.com/batchagent/batchagent/queue"
)

// TestCoordinatorEnqueueWaitsOutRedis: a Redis that goes down while the
// coordinator enqueues, and comes back 3 s later, delays the enqueuing
// and stops nothing: every input is enqueued once, in order, and the
// total set. Before, the first refused connection ended the run (exit 1).
func TestCoordinatorEnqueueWaitsOutRedis(t *testing.T) {
	const n = 50
	rs := redistest.Start(t, redistest.Options{AppendOnly: true})
	q, err := queue.Open(t.Context(), rs.URL, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, _, err := q.CreateRun(t.Context(), queue.Run{ID: "blip", Job: []byte("x"), JobPath: "/job.yaml"}); err != nil {
		t.Fatal(err)
	}
	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"i": i}
	}
	var warn bytes.Buffer
	c := &coordinator{q: q, run: "blip", window: 1000, inputs: batchagent.Slice(inputs),
		progress: make(chan struct{}, 1), outage: time.Minute, warn: &warn}
	c.total.Store(-1)

	rs.Stop() // down before the first input
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(3 * time.Second) // longer than the Redis client's own retries
		rs.Restart(t)
	}()
	err = c.enqueue(t.Context())
	<-restarted
	if err != nil {
		t.Fatalf("enqueue through a 3 s Redis outage = %v, want nil", err)
	}
	st, err := q.RunStatus(t.Context(), "blip")
	if err != nil {
		t.Fatal(err)
	}
	if st.Enqueued != n || st.Total != n || c.total.Load() != n {
		t.Errorf("after the outage: enqueued %d, total %d (coordinator's %d), want %d each", st.Enqueued, st.Total, c.total.Load(), n)
	}
	if !bytes.Contains(warn.Bytes(), []byte("trying again for up to 1m0s")) {
		t.Errorf("warning = %q, want one saying the coordinator tries again", warn.String())
	}
}

// TestCoordinatorEnqueueOutageBudget: a Redis down for longer than the
// outage budget ends the enqueuing with an error naming the budget.
func TestCoordinatorEnqueueOutageBudget(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	q, err := queue.Open(t.Context(), rs.URL, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, _, err := q.CreateRun(t.Context(), queue.Run{ID: "down", Job: []byte("x"), JobPath: "/job.yaml"}); err != nil {
		t.Fatal(err)
	}
	c := &coordinator{q: q, run: "down", window: 1000, inputs: batchagent.Slice([]batchagent.Input{{"i": 0}}),
		progress: make(chan struct{}, 1), outage: 300 * time.Millisecond}
	c.total.Store(-1)
	rs.Stop()
	err = c.enqueue(t.Context())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("outage budget")) {
		t.Fatalf("enqueue with Redis down past the budget = %v, want an error naming the outage budget", err)
	}
}
