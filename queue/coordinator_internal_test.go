package queue

import (
	"bytes"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/redistest"
)

// TestCoordinatorEnqueueWaitsOutRedis: a Redis that goes down while the
// coordinator enqueues, and comes back 3 s later, delays the enqueuing
// and stops nothing: every input is enqueued once, in order, and the
// total set. Before, the first refused connection ended the run (exit 1).
func TestCoordinatorEnqueueWaitsOutRedis(t *testing.T) {
	const n = 50
	rs := redistest.Start(t, redistest.Options{AppendOnly: true})
	q, err := Open(t.Context(), rs.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, _, err := q.CreateRun(t.Context(), Run{ID: "blip", Job: []byte("x"), JobPath: "/job.yaml"}); err != nil {
		t.Fatal(err)
	}
	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"i": i}
	}
	var warn bytes.Buffer
	c := testCoordinator(t, CoordinatorConfig{Client: q, Run: Run{ID: "blip"}, Inputs: slice(inputs),
		OutageBudget: time.Minute, Warn: func(msg string) { warn.WriteString(msg + "\n") }})

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
	q, err := Open(t.Context(), rs.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, _, err := q.CreateRun(t.Context(), Run{ID: "down", Job: []byte("x"), JobPath: "/job.yaml"}); err != nil {
		t.Fatal(err)
	}
	c := testCoordinator(t, CoordinatorConfig{Client: q, Run: Run{ID: "down"}, Inputs: slice([]batchagent.Input{{"i": 0}}),
		OutageBudget: 300 * time.Millisecond})
	rs.Stop()
	err = c.enqueue(t.Context())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("outage budget")) {
		t.Fatalf("enqueue with Redis down past the budget = %v, want an error naming the outage budget", err)
	}
}

// testCoordinator returns a coordinator of cfg (its Sink discards) ready to
// enqueue from the first input.
func testCoordinator(t *testing.T, cfg CoordinatorConfig) *Coordinator {
	t.Helper()
	cfg.Sink = func([]Collected) error { return nil }
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.inputs, err = cfg.Inputs(); err != nil {
		t.Fatal(err)
	}
	return c
}

// slice returns an Inputs func over in.
func slice(in []batchagent.Input) func() (batchagent.Inputs, error) {
	return func() (batchagent.Inputs, error) { return batchagent.Slice(in), nil }
}
