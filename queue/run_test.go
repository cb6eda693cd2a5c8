package queue_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/batchagent/batchagent/queue"
)

func TestCreateRunIdempotent(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	created := time.Date(2026, 11, 25, 4, 0, 0, 123456789, time.UTC)
	r := queue.Run{ID: "a:b", Job: []byte("prompt: x\n"), JobPath: "/j.yaml", Created: created}
	st, existed, err := c.CreateRun(ctx, r)
	if err != nil || existed {
		t.Fatalf("CreateRun = %v, existed %v", err, existed)
	}
	want := queue.RunStatus{Run: r, Total: -1}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Fatalf("CreateRun status (-want +got):\n%s", diff)
	}
	enqueue(t, c, "a:b", 0, 2)
	again, existed, err := c.CreateRun(ctx, queue.Run{ID: "a:b", Job: []byte("other"), JobPath: "/other.yaml"})
	if err != nil || !existed {
		t.Fatalf("CreateRun again = %v, existed %v; want existed", err, existed)
	}
	want.Enqueued = 2
	if diff := cmp.Diff(want, again); diff != "" {
		t.Fatalf("CreateRun again changed the run (-want +got):\n%s", diff)
	}
	if _, _, err := c.CreateRun(ctx, queue.Run{}); err == nil {
		t.Fatalf("CreateRun(empty ID) = nil, want an error")
	}
}

func TestRunsAndStatus(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Created out of order; "a" and "a:results" must not collide.
	for i, id := range []string{"late", "a", "a:results"} {
		_, _, err := c.CreateRun(ctx, queue.Run{ID: id, Job: []byte(id), Created: base.Add(time.Duration(2-i) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RunStatus(ctx, "missing"); !errors.Is(err, queue.ErrNoRun) {
		t.Fatalf("RunStatus(missing) = %v, want ErrNoRun", err)
	}
	for _, op := range []func() error{
		func() error { return c.SetTotal(ctx, "missing", 1) },
		func() error { return c.CoordinatorBeat(ctx, "missing") },
	} {
		if err := op(); !errors.Is(err, queue.ErrNoRun) {
			t.Errorf("SetTotal/CoordinatorBeat(missing) = %v, want ErrNoRun", err)
		}
	}
	enqueue(t, c, "a", 0, 2)
	before := time.Now().Add(-time.Second)
	if err := c.CoordinatorBeat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	st, err := c.RunStatus(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if st.Finished || st.Total != -1 || st.Coordinator.Before(before) {
		t.Fatalf("RunStatus(a) = %+v; want unfinished, Total -1, a coordinator beat", st)
	}
	if err := c.SetTotal(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Record(ctx, "a", i, []byte("x")); err != nil {
			t.Fatal(err)
		}
		st, err := c.RunStatus(ctx, "a")
		if err != nil || st.Done != i+1 || st.Finished != (i == 1) {
			t.Fatalf("after %d results RunStatus = %+v, %v", i+1, st, err)
		}
	}
	runs, err := c.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID+":"+string(r.Job))
	}
	if diff := cmp.Diff([]string{"a:results:a:results", "a:a", "late:late"}, ids); diff != "" {
		t.Fatalf("Runs by Created (-want +got):\n%s", diff)
	}
	if !runs[1].Finished || runs[1].Done != 2 || runs[0].Done != 0 {
		t.Fatalf("Runs = %+v; want a finished with 2 done, a:results untouched", runs)
	}
}

// keys returns every key of the Redis behind c, sorted.
func keys(t *testing.T, c *queue.Client) []string {
	t.Helper()
	var out []string
	iter := c.Redis().Scan(t.Context(), 0, "*", 100).Iterator()
	for iter.Next(t.Context()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestDeleteRunRemovesKeys(t *testing.T) {
	c, _ := open(t)
	ctx := t.Context()
	for _, id := range []string{"gone", "kept"} {
		createRun(t, c, id)
		enqueue(t, c, id, 0, 1)
		if _, err := c.Record(ctx, id, 0, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := c.Checkpointer().Save(ctx, stateOf(id, 0)); err != nil {
			t.Fatal(err)
		}
	}
	all := keys(t, c)
	for _, k := range all {
		if !strings.HasPrefix(k, queue.DefaultPrefix) {
			t.Errorf("key %q lacks the prefix %q", k, queue.DefaultPrefix)
		}
	}
	if err := c.DeleteRun(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRun(ctx, "gone"); err != nil {
		t.Fatalf("DeleteRun again = %v, want nil", err)
	}
	var left []string
	for _, k := range keys(t, c) {
		if strings.Contains(k, "gone") {
			left = append(left, k)
		}
	}
	if len(left) != 0 {
		t.Fatalf("after DeleteRun keys %q remain (all before: %q)", left, all)
	}
	if n, err := c.Redis().ZScore(ctx, c.Key("runs"), "gone").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("runs still lists gone (score %v, %v)", n, err)
	}
	if _, err := c.RunStatus(ctx, "gone"); !errors.Is(err, queue.ErrNoRun) {
		t.Fatalf("RunStatus(gone) = %v, want ErrNoRun", err)
	}
	if _, err := c.Record(ctx, "gone", 1, []byte("late")); !errors.Is(err, queue.ErrNoRun) {
		t.Fatalf("Record(gone) = %v, want ErrNoRun (no keys recreated)", err)
	}
	if st, err := c.RunStatus(ctx, "kept"); err != nil || st.Done != 1 {
		t.Fatalf("RunStatus(kept) = %+v, %v; want untouched", st, err)
	}
	if states, err := c.Checkpointer().Load(ctx, "kept"); err != nil || len(states) != 1 {
		t.Fatalf("Load(kept) = %d states, %v; want 1", len(states), err)
	}
}

func TestPrefix(t *testing.T) {
	c, s := open(t)
	other, err := queue.Open(t.Context(), s.URL, queue.Options{Prefix: "x:"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	createRun(t, other, "r")
	if _, err := c.RunStatus(t.Context(), "r"); !errors.Is(err, queue.ErrNoRun) {
		t.Fatalf("RunStatus under ba: of a run made under x: = %v, want ErrNoRun", err)
	}
	for _, k := range keys(t, c) {
		if !strings.HasPrefix(k, "x:") {
			t.Errorf("key %q lacks the prefix x:", k)
		}
	}
	if got := other.Key("run", "r"); got != "x:run:r" {
		t.Errorf("Key(run, r) = %q, want x:run:r", got)
	}
}
