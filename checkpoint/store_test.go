package checkpoint_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// open opens a Store in a fresh temporary directory, closed at the end of
// the test, and returns it with its path.
func open(t *testing.T, cfg checkpoint.Config) (*checkpoint.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.db")
	s, err := checkpoint.Open(path, cfg)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s, path
}

// asLoaded returns states as Load returns them: final ones without their
// conversation.
func asLoaded(states ...agent.State) []agent.State {
	out := make([]agent.State, len(states))
	for i, st := range states {
		if st.Status != agent.StatusRunning {
			st.Messages = nil
		}
		out[i] = st
	}
	return out
}

// checkStates checks that Load returns want, final states without their
// conversation, and that State returns each of want in full.
func checkStates(t *testing.T, s *checkpoint.Store, jobID string, want ...agent.State) {
	t.Helper()
	got, err := s.Load(t.Context(), jobID)
	if err != nil {
		t.Fatalf("Load(%s) = %v", jobID, err)
	}
	if diff := cmp.Diff(asLoaded(want...), got); diff != "" {
		t.Errorf("Load(%s) mismatch (-want +got):\n%.2000s", jobID, diff)
	}
	for _, w := range want {
		st, err := s.State(t.Context(), jobID, w.Index)
		if err != nil {
			t.Errorf("State(%s, %d) = %v", jobID, w.Index, err)
			continue
		}
		if diff := cmp.Diff(w, st); diff != "" {
			t.Errorf("State(%s, %d) mismatch (-want +got):\n%.2000s", jobID, w.Index, diff)
		}
	}
}

// fullState returns a state of agent idx of jobID with every field set.
func fullState(jobID string, idx int) agent.State {
	return agent.State{
		JobID:  jobID,
		Index:  idx,
		Input:  job.Input{"name": "ada", "n": json.Number(strconv.Itoa(idx))},
		Status: agent.StatusFailed,
		Failure: &job.Failure{Kind: "validation", Op: "validate", Turn: 2,
			Cause: []job.Link{{Message: "output invalid", Class: "validation"}},
			Problems: []schema.Problem{
				{Path: "$.name", Message: `missing required property "name"`},
			}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "look up ada"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"q":"ada"}`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "lookup", Content: "not found", IsError: true},
			{Role: llm.RoleAssistant, Content: `{"name":"ada"}`},
		},
		Turns:       3,
		ModelCalls:  4,
		Retries:     1,
		Corrections: 1,
		ToolCalls:   1,
		Repairs:     1,
		Usage:       llm.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 64},
		Timings: agent.Timings{
			Queue: time.Millisecond, Inference: 2 * time.Second, Tools: 3 * time.Millisecond,
			Backoff: 4 * time.Millisecond, TTFT: 5 * time.Millisecond,
		},
		Output:  json.RawMessage(`{"name":"ada","n":1}`),
		Raw:     "```json\n{\"name\":\"ada\",\"n\":1}\n```",
		Started: time.Date(2026, 11, 27, 12, 0, 0, 5, time.FixedZone("", -7*3600)),
		Spans: []job.Span{
			{Turn: 0, Start: time.Date(2026, 11, 27, 19, 0, 0, 6, time.UTC), Queue: time.Millisecond, Inference: time.Second, TTFT: 900 * time.Millisecond, Tools: 3 * time.Millisecond},
			{Turn: 1, Start: time.Date(2026, 11, 27, 19, 0, 2, 0, time.UTC), Inference: time.Second, Backoff: 4 * time.Millisecond},
			{Turn: 2, Start: time.Date(2026, 11, 27, 19, 0, 4, 0, time.UTC), Inference: time.Nanosecond, Tier: 1},
		},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	ctx := t.Context()
	want := []agent.State{fullState("j", 0), fullState("j", 1), fullState("j", 7)}
	want[1].Status = agent.StatusRunning
	want[1].Output = nil
	// Saved out of order: Load orders by index.
	for _, i := range []int{2, 0, 1} {
		if err := s.Save(ctx, want[i]); err != nil {
			t.Fatalf("Save(%d) = %v", want[i].Index, err)
		}
	}
	if err := s.Save(ctx, fullState("other", 0)); err != nil {
		t.Fatalf("Save(other) = %v", err)
	}
	checkStates(t, s, "j", want...)
	for _, c := range []struct {
		job string
		idx int
	}{{"j", 2}, {"none", 0}} {
		if _, err := s.State(ctx, c.job, c.idx); !errors.Is(err, checkpoint.ErrNoState) {
			t.Errorf("State(%s, %d) = %v, want %v", c.job, c.idx, err, checkpoint.ErrNoState)
		}
	}
	got, err := s.Load(ctx, "none")
	if err != nil || len(got) != 0 {
		t.Errorf("Load(none) = %v, %v, want no states", got, err)
	}
}

func TestLastWriteWins(t *testing.T) {
	const n = 50
	tests := []struct {
		name string
		cfg  checkpoint.Config
		lock bool // hold the write lock while saving
	}{
		// The writer's first transaction waits for the lock while the other
		// saves queue up behind it: they share the next transaction.
		{"within a batch", checkpoint.Config{MaxBatch: n}, true},
		// One state per transaction: every save is its own batch.
		{"across batches", checkpoint.Config{FlushInterval: -1, MaxBatch: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := open(t, tt.cfg)
			release := func() {}
			if tt.lock {
				release = lockWrites(t, path)
			}
			// A Save whose ctx has ended returns at once, but its state stays
			// queued: this queues n-1 saves of one agent in order.
			done, cancel := context.WithCancel(t.Context())
			cancel()
			for turn := range n - 1 {
				st := fullState("j", 0)
				st.Turns = turn
				// nil when the commit won the race with ctx.
				if err := s.Save(done, st); err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("Save(cancelled ctx, turn %d) = %v, want nil or %v", turn, err, context.Canceled)
				}
			}
			release()
			last := fullState("j", 0)
			last.Turns = n - 1
			if err := s.Save(t.Context(), last); err != nil {
				t.Fatalf("Save(turn %d) = %v", n-1, err)
			}
			checkStates(t, s, "j", last)
		})
	}
}

func TestSaveIsDurable(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	other, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open(%q) second time = %v", path, err)
	}
	defer other.Close()
	for i := range 5 {
		want := fullState("j", i)
		if err := s.Save(t.Context(), want); err != nil {
			t.Fatalf("Save(%d) = %v", i, err)
		}
		// The moment Save returns, another connection sees the state.
		got, err := other.Load(t.Context(), "j")
		if err != nil || len(got) != i+1 {
			t.Fatalf("other.Load(j) after Save(%d) = %d states, %v; want %d", i, len(got), err, i+1)
		}
		if diff := cmp.Diff(asLoaded(want), got[i:i+1]); diff != "" {
			t.Errorf("other.Load(j)[%d] mismatch (-want +got):\n%s", i, diff)
		}
	}
}

func TestConcurrentSaves(t *testing.T) {
	s, _ := open(t, checkpoint.Config{MaxBatch: 16})
	const goroutines, perG = 100, 20
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for turn := range perG {
				st := fullState("j", g)
				st.Turns = turn
				if err := s.Save(t.Context(), st); err != nil {
					t.Errorf("Save(%d, turn %d) = %v", g, turn, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := s.Load(t.Context(), "j")
	if err != nil {
		t.Fatalf("Load(j) = %v", err)
	}
	if len(got) != goroutines {
		t.Fatalf("Load(j) = %d states, want %d", len(got), goroutines)
	}
	for i, st := range got {
		if st.Index != i || st.Turns != perG-1 {
			t.Errorf("Load(j)[%d] = index %d turns %d, want index %d turns %d", i, st.Index, st.Turns, i, perG-1)
		}
	}
}

func TestSaveAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.db")
	s, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if err := s.Save(t.Context(), fullState("j", 0)); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("Save after Close = %v, want %v", err, checkpoint.ErrClosed)
	}
	if _, err := s.Load(t.Context(), "j"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("Load after Close = %v, want %v", err, checkpoint.ErrClosed)
	}
}

func TestCloseFlushesPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.db")
	// The writer may wait an hour for a batch to fill: Close must not.
	s, err := checkpoint.Open(path, checkpoint.Config{FlushInterval: time.Hour})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	// A saver that stops waiting gets its context's error, unless the
	// commit was already done when it looked (a lone save is committed
	// at once: it won the race once in CI); either way the state is
	// queued, and Close must write it.
	if err := s.Save(done, fullState("j", 3)); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Save(cancelled ctx) = %v, want nil or %v", err, context.Canceled)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	r, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("reopen = %v", err)
	}
	defer r.Close()
	got, err := r.Load(t.Context(), "j")
	if err != nil || len(got) != 1 || got[0].Index != 3 {
		t.Errorf("Load(j) after Close = %+v, %v; want the state of agent 3", got, err)
	}
}

func TestSaveCancelWhileWaiting(t *testing.T) {
	s, path := open(t, checkpoint.Config{FlushInterval: -1})
	// Another connection holds the write lock, so the writer's commit waits.
	release := lockWrites(t, path)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Save(ctx, fullState("j", 0)) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Save(ctx cancelled while waiting) = %v, want %v", err, context.Canceled)
	}
	release()
	// The state was still written: the next Save commits after it.
	if err := s.Save(t.Context(), fullState("j", 1)); err != nil {
		t.Fatalf("Save after release = %v", err)
	}
	got, err := s.Load(t.Context(), "j")
	if err != nil || len(got) != 2 {
		t.Errorf("Load(j) = %d states, %v; want 2", len(got), err)
	}
}

// TestFailedCommitRollsBack checks that a transaction failing midway
// leaves nothing of its states behind and that the next one commits: the
// writer rolls it back itself.
func TestFailedCommitRollsBack(t *testing.T) {
	s, path := open(t, checkpoint.Config{FlushInterval: -1})
	if err := s.Save(t.Context(), fullState("keep", 0)); err != nil {
		t.Fatalf("Save(keep 0) = %v", err)
	}
	// A trigger on another connection makes SQLite refuse the final states
	// of job bad, after the transaction has begun and written to running.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse BEFORE INSERT ON finished
		WHEN NEW.job_id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by test'); END`); err != nil {
		t.Fatalf("CREATE TRIGGER = %v", err)
	}
	running := fullState("bad", 1)
	running.Status = agent.StatusRunning
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	bad := fullState("bad", 0)
	s.SaveAsync(&running, func(err error) { errs[0] = err; wg.Done() })
	s.SaveAsync(&bad, func(err error) { errs[1] = err; wg.Done() })
	wg.Wait()
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "refused by test") {
		t.Errorf("Save(bad 0) = %v, want the trigger's error", errs[1])
	}
	if err := s.Save(t.Context(), fullState("keep", 1)); err != nil {
		t.Fatalf("Save(keep 1) after a failed commit = %v", err)
	}
	checkStates(t, s, "keep", fullState("keep", 0), fullState("keep", 1))
	var finished, runningRows int
	if err := db.QueryRowContext(t.Context(), `SELECT (SELECT count(*) FROM finished WHERE job_id = 'bad'), (SELECT count(*) FROM running WHERE job_id = 'bad')`).Scan(&finished, &runningRows); err != nil {
		t.Fatal(err)
	}
	// The running state may have committed on its own, before the final
	// one was queued; the final state never.
	if finished != 0 || (errs[0] != nil && runningRows != 0) {
		t.Errorf("job bad after its failed commit: %d finished rows, %d running rows (running save: %v); want no finished row, and no running row if its save failed", finished, runningRows, errs[0])
	}
}

// lockWrites takes the write lock of the SQLite file at path from another
// connection and returns the function that releases it.
func lockWrites(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", path, err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatalf("db.Conn() = %v", err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE = %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Errorf("ROLLBACK = %v", err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// TestSaveAsync checks that done is called once per state, only after the
// state is durable, and at once with ErrClosed after Close.
func TestSaveAsync(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	other, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open(%q) second time = %v", path, err)
	}
	defer other.Close()
	release := lockWrites(t, path)

	const n = 10
	type call struct {
		idx     int
		err     error
		visible bool // whether another connection saw the state when done was called
	}
	calls := make(chan call, 2*n)
	for i := range n {
		st := fullState("j", i)
		st.Status = []agent.Status{agent.StatusRunning, agent.StatusDone}[i%2]
		s.SaveAsync(&st, func(err error) {
			got, lerr := other.Load(context.Background(), "j")
			if lerr != nil {
				t.Errorf("Load in done = %v", lerr)
			}
			visible := slices.ContainsFunc(got, func(g agent.State) bool { return cmp.Equal(g, asLoaded(st)[0]) })
			calls <- call{i, err, visible}
		})
	}
	select {
	case c := <-calls:
		t.Fatalf("done(%d) called while the file was locked: the state cannot be durable yet", c.idx)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	seen := map[int]bool{}
	for range n {
		c := <-calls
		if c.err != nil {
			t.Errorf("done(%d) = %v, want nil", c.idx, c.err)
		}
		if seen[c.idx] {
			t.Errorf("done(%d) called twice", c.idx)
		}
		seen[c.idx] = true
		if !c.visible {
			t.Errorf("done(%d) called before another connection could load the state", c.idx)
		}
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	var got error
	late := fullState("j", 99)
	s.SaveAsync(&late, func(err error) { got = err })
	if !errors.Is(got, checkpoint.ErrClosed) {
		t.Errorf("SaveAsync after Close: done(%v), want %v, called before SaveAsync returns", got, checkpoint.ErrClosed)
	}
	select {
	case c := <-calls:
		t.Errorf("extra done(%d)", c.idx)
	default:
	}
}
