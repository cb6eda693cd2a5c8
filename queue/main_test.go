package queue_test

import (
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/batchagent/batchagent/internal/redistest"
	"github.com/batchagent/batchagent/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open starts a redis-server for t and opens a Client on it.
func open(t *testing.T) (*queue.Client, *redistest.Server) {
	t.Helper()
	s := redistest.Start(t, redistest.Options{})
	return openURL(t, s.URL), s
}

// openURL opens a Client on url, closed when t ends.
func openURL(t *testing.T, url string) *queue.Client {
	t.Helper()
	c, err := queue.Open(t.Context(), url, queue.Options{})
	if err != nil {
		t.Fatalf("Open(%s) = %v", queue.RedactURL(url), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// createRun registers a run id for t.
func createRun(t *testing.T, c *queue.Client, id string) queue.RunStatus {
	t.Helper()
	st, existed, err := c.CreateRun(t.Context(), queue.Run{ID: id, Job: []byte("id: " + id + "\n"), JobPath: "/jobs/" + id + ".yaml"})
	if err != nil || existed {
		t.Fatalf("CreateRun(%q) = %v, existed %v; want a new run", id, err, existed)
	}
	return st
}

// enqueue enqueues n inputs {"i": k} of run from its current Enqueued.
func enqueue(t *testing.T, c *queue.Client, run string, from, n int) {
	t.Helper()
	for k := from; k < from+n; k++ {
		if err := c.Enqueue(t.Context(), run, k, []byte(`{"i":`+strconv.Itoa(k)+`}`)); err != nil {
			t.Fatalf("Enqueue(%q, %d) = %v", run, k, err)
		}
	}
}
