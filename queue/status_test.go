package queue_test

import (
	"testing"
	"time"

	"github.com/batchagent/batchagent/queue"
)

// TestStatus snapshots a queue with a run and a live worker: the URL
// without its password, the run's counts with no total yet and its
// coordinator's beat, and the worker's agents held.
func TestStatus(t *testing.T) {
	c, srv := open(t)
	createRun(t, c, "r1")
	enqueue(t, c, "r1", 0, 2)
	if err := c.CoordinatorBeat(t.Context(), "r1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Beat(t.Context(), "w1", 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := queue.RedactURL(srv.URL); st.Redis != want {
		t.Errorf("Redis = %q, want %q", st.Redis, want)
	}
	if len(st.Runs) != 1 || st.Runs[0].ID != "r1" || st.Runs[0].Enqueued != 2 || st.Runs[0].Total != nil || st.Runs[0].BeatAge == nil || st.Runs[0].Job != "/jobs/r1.yaml" {
		t.Errorf("Runs = %+v; want r1 with 2 enqueued, no total, a coordinator beat", st.Runs)
	}
	if len(st.Workers) != 1 || st.Workers[0].ID != "w1" || !st.Workers[0].Alive || st.Workers[0].Held != 3 {
		t.Errorf("Workers = %+v; want w1 alive holding 3", st.Workers)
	}
}
