package queue_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/queue"
)

func TestRecordOnceUnderConcurrency(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	var firsts atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 20) // one per caller at most
	for k := range 20 {
		wg.Go(func() {
			first, err := c.Record(ctx, "r", 7, fmt.Appendf(nil, `{"index":7,"by":%d}`, k))
			if err != nil {
				errs <- err
				return
			}
			if first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Record = %v", err)
	}
	if n := firsts.Load(); n != 1 {
		t.Fatalf("%d Record calls returned first=true, want exactly 1", n)
	}
	st, err := c.RunStatus(ctx, "r")
	if err != nil || st.Done != 1 {
		t.Fatalf("RunStatus = %+v, %v; want Done 1", st, err)
	}
	rec, err := c.Results(ctx, "r", "", 100, 0)
	if err != nil || len(rec) != 1 || rec[0].Index != 7 {
		t.Fatalf("Results = %+v, %v; want one entry for index 7", rec, err)
	}
	line, ok, err := c.Result(ctx, "r", 7)
	if err != nil || !ok || string(line) != string(rec[0].Line) {
		t.Fatalf("Result(7) = %s, %v, %v; want the line Results gave, %s", line, ok, err, rec[0].Line)
	}
	if _, ok, err := c.Result(ctx, "r", 8); err != nil || ok {
		t.Fatalf("Result(8) = ok %v, %v; want none", ok, err)
	}
	if _, err := c.Record(ctx, "nope", 0, []byte(`{}`)); !errors.Is(err, queue.ErrNoRun) {
		t.Fatalf("Record(unknown run) = %v, want ErrNoRun", err)
	}
}

func TestResultsCursorAndBlocking(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	for _, i := range []int{3, 0, 2} {
		if _, err := c.Record(ctx, "r", i, fmt.Appendf(nil, "line %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.Results(ctx, "r", "0", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range first {
		got = append(got, fmt.Sprintf("%d=%s", r.Index, r.Line))
	}
	if diff := cmp.Diff([]string{"3=line 3", "0=line 0"}, got); diff != "" {
		t.Fatalf("Results(from start, max 2) (-want +got):\n%s", diff)
	}
	rest, err := c.Results(ctx, "r", first[1].Cursor, 10, 0)
	if err != nil || len(rest) != 1 || rest[0].Index != 2 || string(rest[0].Line) != "line 2" {
		t.Fatalf("Results(after cursor) = %+v, %v; want index 2", rest, err)
	}
	cursor := rest[0].Cursor
	if none, err := c.Results(ctx, "r", cursor, 10, 20*time.Millisecond); err != nil || len(none) != 0 {
		t.Fatalf("Results(at the end) = %+v, %v; want none", none, err)
	}

	// A blocked Results returns the result recorded while it waits.
	type reply struct {
		rec []queue.Recorded
		err error
	}
	done := make(chan reply, 1)
	go func() { // owned by the test: it waits on done
		rec, err := c.Results(ctx, "r", cursor, 10, 10*time.Second)
		done <- reply{rec, err}
	}()
	if _, err := c.Record(ctx, "r", 1, []byte("line 1")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.rec) != 1 || r.rec[0].Index != 1 || string(r.rec[0].Line) != "line 1" {
		t.Fatalf("blocked Results = %+v, %v; want index 1", r.rec, r.err)
	}
	st, err := c.RunStatus(ctx, "r")
	if err != nil || st.Done != 4 {
		t.Fatalf("RunStatus = %+v, %v; want Done 4", st, err)
	}
}

// TestRetry: a recorded result taken back with Retry is gone from the
// run (its line, its entry in the results stream, its saved state, one
// off Done), its input is a task again, and the next result recorded for
// it is the first; a second Retry, with nothing recorded, changes nothing.
func TestRetry(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	enqueue(t, c, "r", 0, 2)
	if _, err := c.Read(ctx, "w", 2, 0); err != nil {
		t.Fatal(err)
	}
	for i, line := range []string{`{"index":0}`, `{"index":1,"error":{"kind":"backend"}}`} {
		if _, err := c.Record(ctx, "r", i, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Redis().HSet(ctx, c.Key("state", "{r}"), "1", `{"index":1}`).Err(); err != nil {
		t.Fatal(err)
	}
	recs, err := c.Results(ctx, "r", "0", 10, 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("Results = %v, %v; want 2", recs, err)
	}
	ok, err := c.Retry(ctx, "r", 1, recs[1].Cursor, []byte(`{"i":1}`))
	if !ok || err != nil {
		t.Fatalf("Retry(1) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := c.Retry(ctx, "r", 1, recs[1].Cursor, []byte(`{"i":1}`)); ok || err != nil {
		t.Errorf("Retry(1) again = %v, %v; want false, nil", ok, err)
	}
	if st, err := c.RunStatus(ctx, "r"); err != nil || st.Done != 1 {
		t.Errorf("RunStatus after Retry = %+v, %v; want Done 1", st, err)
	}
	if n, err := c.Redis().HExists(ctx, c.Key("state", "{r}"), "1").Result(); err != nil || n {
		t.Errorf("state of input 1 after Retry: exists %v, %v; want deleted", n, err)
	}
	recs, err = c.Results(ctx, "r", "0", 10, 0)
	if err != nil || len(recs) != 1 || recs[0].Index != 0 {
		t.Errorf("Results after Retry = %+v, %v; want index 0 alone", recs, err)
	}
	tasks, err := c.Read(ctx, "w", 10, 0)
	if err != nil || len(tasks) != 1 || tasks[0].Index != 1 || string(tasks[0].Input) != `{"i":1}` {
		t.Fatalf("Read after Retry = %+v, %v; want input 1's task again", tasks, err)
	}
	if first, err := c.Record(ctx, "r", 1, []byte(`{"index":1}`)); !first || err != nil {
		t.Errorf("Record after Retry = %v, %v; want the first", first, err)
	}
	if _, err := c.Retry(ctx, "nope", 0, "0-1", []byte(`{}`)); !errors.Is(err, queue.ErrNoRun) {
		t.Errorf("Retry of an unknown run = %v, want ErrNoRun", err)
	}
}
