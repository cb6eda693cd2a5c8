package checkpoint_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/s2"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// query runs a one-value query on the file at path through its own
// connection.
func query[T any](t *testing.T, path, q string, args ...any) T {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", path, err)
	}
	defer db.Close()
	var v T
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&v); err != nil {
		t.Fatalf("%s = %v", q, err)
	}
	return v
}

// execSQL runs a statement on the file at path through its own connection.
func execSQL(t *testing.T, path, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s = %v", q, err)
	}
}

// TestLatestStateAcrossKinds follows one agent through the life a re-run
// gives it: running, failed, running again (a --retry-failed run), done.
// Running states overwrite a row while final states are appended, so the
// sequence numbers alone decide which state is the agent's.
func TestLatestStateAcrossKinds(t *testing.T) {
	s, path := open(t, checkpoint.Config{FlushInterval: -1})
	ctx := t.Context()
	steps := []struct {
		status        agent.Status
		turns         int
		running, segs int // rows in running and finished afterwards
	}{
		{agent.StatusRunning, 1, 1, 0},
		{agent.StatusRunning, 2, 1, 0},
		{agent.StatusFailed, 3, 0, 1},  // finishing deletes the running row
		{agent.StatusRunning, 4, 1, 1}, // re-run: newer than the failure
		{agent.StatusDone, 5, 0, 2},
	}
	for _, step := range steps {
		st := fullState("j", 4)
		st.Status, st.Turns = step.status, step.turns
		if err := s.Save(ctx, st); err != nil {
			t.Fatalf("Save(%s, turn %d) = %v", step.status, step.turns, err)
		}
		checkStates(t, s, "j", st)
		if n := query[int](t, path, `SELECT count(*) FROM running`); n != step.running {
			t.Errorf("after %s turn %d: %d running rows, want %d", step.status, step.turns, n, step.running)
		}
		if n := query[int](t, path, `SELECT count(*) FROM finished`); n != step.segs {
			t.Errorf("after %s turn %d: %d segments, want %d", step.status, step.turns, n, step.segs)
		}
	}
	sm, err := s.Summary(ctx, "j")
	if err != nil {
		t.Fatalf("Summary = %v", err)
	}
	if want := map[agent.Status]int{agent.StatusDone: 1}; !cmp.Equal(sm.ByStatus, want) || sm.Turns != 5 {
		t.Errorf("Summary = %v, %d turns; want %v, 5 turns", sm.ByStatus, sm.Turns, want)
	}
}

// TestRunningRowsOfAnEarlierProcess checks that agents finishing after a
// restart still have the running rows of the stopped process deleted.
func TestRunningRowsOfAnEarlierProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.db")
	first, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	for i := range 3 {
		st := fullState("j", i)
		st.Status = agent.StatusRunning
		if err := first.Save(t.Context(), st); err != nil {
			t.Fatalf("Save(%d) = %v", i, err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	s, _ := reopen(t, path)
	for i := range 2 {
		st := fullState("j", i)
		st.Status = agent.StatusDone
		if err := s.Save(t.Context(), st); err != nil {
			t.Fatalf("Save(%d) = %v", i, err)
		}
	}
	if n := query[int](t, path, `SELECT count(*) FROM running`); n != 1 {
		t.Errorf("%d running rows, want 1 (agent 2)", n)
	}
	got, err := s.Load(t.Context(), "j")
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	var statuses []agent.Status
	for _, st := range got {
		statuses = append(statuses, st.Status)
	}
	if want := []agent.Status{agent.StatusDone, agent.StatusDone, agent.StatusRunning}; !cmp.Equal(statuses, want) {
		t.Errorf("Load statuses = %v, want %v", statuses, want)
	}
}

func reopen(t *testing.T, path string) (*checkpoint.Store, string) {
	t.Helper()
	s, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// TestLargeFinalStatesSplit saves final states too large to share one
// segment within one transaction: they are split, and all load.
func TestLargeFinalStatesSplit(t *testing.T) {
	s, path := open(t, checkpoint.Config{MaxBatch: 3})
	release := lockWrites(t, path)
	big := strings.Repeat("x", 3<<20) // two of them exceed a segment
	done := make(chan error, 3)
	var want []agent.State
	for i := range 3 {
		st := fullState("j", i)
		st.Status = agent.StatusDone
		st.Messages = append(st.Messages, llm.Message{Role: llm.RoleUser, Content: fmt.Sprint(i, big)})
		want = append(want, st)
		go func() { done <- s.Save(context.Background(), st) }()
	}
	release()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatalf("Save = %v", err)
		}
	}
	if n := query[int](t, path, `SELECT count(*) FROM finished`); n < 2 {
		t.Errorf("%d segments, want the states split over at least 2", n)
	}
	if n := query[int](t, path, `SELECT sum(n) FROM finished`); n != 3 {
		t.Errorf("segments hold %d states, want 3", n)
	}
	checkStates(t, s, "j", want...)
}

// TestDamagedSegment checks that a segment whose count disagrees with its
// lines is reported with its sequence number, not loaded in part.
func TestDamagedSegment(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	for i := range 2 {
		if err := s.Save(t.Context(), fullState("j", i)); err != nil {
			t.Fatalf("Save(%d) = %v", i, err)
		}
	}
	seq := query[int64](t, path, `SELECT min(seq) FROM finished`)
	execSQL(t, path, `UPDATE finished SET n = n + 1 WHERE seq = ?`, seq)
	_, err := s.Load(t.Context(), "j")
	if want := fmt.Sprintf("segment %d:", seq); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load of a damaged segment = %v, want an error naming %q", err, want)
	}
	execSQL(t, path, `UPDATE finished SET n = n - 1, states = ? WHERE seq = ?`, s2.Encode(nil, []byte("{\"index\": 0\n")), seq)
	if _, err := s.Summary(t.Context(), "j"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("state %d:", seq)) {
		t.Errorf("Summary with a truncated state = %v, want an error naming state %d", err, seq)
	}
	execSQL(t, path, `UPDATE finished SET states = ? WHERE seq = ?`, []byte("not compressed"), seq)
	if _, err := s.Load(t.Context(), "j"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("segment %d:", seq)) {
		t.Errorf("Load of a segment that is not S2 = %v, want an error naming segment %d", err, seq)
	}
}

// TestOlderFormatRefused checks that a file of the first format (one
// upserted states table) is refused with a message saying what to do.
func TestOlderFormatRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	execSQL(t, path, `CREATE TABLE states (job_id TEXT, idx INTEGER, status TEXT, turns INTEGER, state BLOB, updated INTEGER)`)
	_, err := checkpoint.Open(path, checkpoint.Config{})
	if err == nil || !strings.Contains(err.Error(), "older batchagent") || !strings.Contains(err.Error(), "new state file") {
		t.Errorf("Open(format 1 file) = %v, want an error saying it is older and to use a new state file", err)
	}
	execSQL(t, path, `PRAGMA user_version = 9`)
	if _, err := checkpoint.Open(path, checkpoint.Config{}); err == nil || !strings.Contains(err.Error(), "format 9") {
		t.Errorf("Open(format 9 file) = %v, want an error naming format 9", err)
	}
}

// TestForeignFileRefused checks that a SQLite file of some other program
// is refused, untouched, instead of gaining the store's tables, while an
// empty file becomes a store.
func TestForeignFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	execSQL(t, path, `CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX users_by_name ON users (name)`)
	_, err := checkpoint.Open(path, checkpoint.Config{})
	if err == nil || !strings.Contains(err.Error(), path+": not a batchagent state file") || !strings.Contains(err.Error(), "users, users_by_name") {
		t.Errorf("Open(foreign SQLite file) = %v, want an error naming the file as not a state file and its tables", err)
	}
	if n := query[int](t, path, `SELECT count(*) FROM sqlite_schema`); n != 2 {
		t.Errorf("objects in the foreign file after Open = %d, want its 2", n)
	}
	if v := query[int](t, path, `PRAGMA user_version`); v != 0 {
		t.Errorf("user_version of the foreign file after Open = %d, want 0", v)
	}
	if m := query[string](t, path, `PRAGMA journal_mode`); m != "delete" {
		t.Errorf("journal mode of the foreign file after Open = %s, want delete (unchanged)", m)
	}

	empty := filepath.Join(t.TempDir(), "empty.db")
	execSQL(t, empty, `PRAGMA user_version = 0`)
	s, err := checkpoint.Open(empty, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open(empty SQLite file) = %v, want a new store", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if m := query[string](t, empty, `PRAGMA journal_mode`); m != "wal" {
		t.Errorf("journal mode of a new store = %s, want wal", m)
	}
	// Reopening the store it made is no foreign file.
	s, err = checkpoint.Open(empty, checkpoint.Config{})
	if err != nil {
		t.Fatalf("reopen = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// TestFormat2Upgraded opens a file of format 2 (no runs.inputs): it is
// upgraded in place and keeps its run and states.
func TestFormat2Upgraded(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	ctx := t.Context()
	// batchagent run stored the backend URL itself in format 2.
	const backend = "openai+http://127.0.0.1:8000/v1?token=sk-secret"
	if _, err := s.Begin(ctx, "j", checkpoint.Fingerprint{"task": "x", "backend": backend}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, fullState("j", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execSQL(t, path, `ALTER TABLE runs DROP COLUMN inputs; PRAGMA user_version = 2`)

	s2, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatalf("Open(format 2 file) = %v", err)
	}
	defer s2.Close()
	// The URL became its digest: the run resumes with the fingerprint a
	// new batchagent makes, and the key is gone from the record.
	fp := checkpoint.Fingerprint{"task": "x", "backend": checkpoint.Digest([]byte(backend))}
	if existed, err := s2.Begin(ctx, "j", fp, false); !existed || err != nil {
		t.Errorf("Begin after the upgrade = %v, %v; want the run found", existed, err)
	}
	if stored := query[string](t, path, `SELECT fingerprint FROM runs`); strings.Contains(stored, "sk-secret") {
		t.Errorf("fingerprint after the upgrade = %s, still holding the backend URL", stored)
	}
	if v := query[int](t, path, `PRAGMA user_version`); v != 5 {
		t.Errorf("user_version after the upgrade = %d, want 5", v)
	}
	if states, err := s2.Load(ctx, "j"); err != nil || len(states) != 1 || states[0].Index != 3 {
		t.Errorf("Load after the upgrade = %d states, %v; want state 3", len(states), err)
	}
	if err := s2.SetInputs(ctx, "j", 5); err != nil {
		t.Fatalf("SetInputs after the upgrade = %v", err)
	}
	if sm, err := s2.Summary(ctx, "j"); err != nil || sm.Pending() != 4 {
		t.Errorf("Summary after the upgrade: pending %d, %v; want 4", sm.Pending(), err)
	}
}

// TestMalformedToolArguments saves a conversation in which the model wrote
// broken tool-call arguments: it must save and load like any other, the
// arguments byte for byte.
func TestMalformedToolArguments(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	st := fullState("j", 0)
	st.Status = agent.StatusRunning
	st.Messages[1].ToolCalls[0].Arguments = []byte(`{"q": "ada`)
	if err := s.Save(t.Context(), st); err != nil {
		t.Fatalf("Save(state with malformed tool arguments) = %v", err)
	}
	checkStates(t, s, "j", st)
	// The same conversation in a final state: Load cuts it out, State
	// returns it.
	st.Status = agent.StatusFailed
	if err := s.Save(t.Context(), st); err != nil {
		t.Fatalf("Save(final state with malformed tool arguments) = %v", err)
	}
	checkStates(t, s, "j", st)
}

// TestRunningRowMismatch checks that a running row whose state names
// another agent than its key is reported, not loaded under either.
func TestRunningRowMismatch(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	st := fullState("j", 0)
	st.Status = agent.StatusRunning
	if err := s.Save(t.Context(), st); err != nil {
		t.Fatalf("Save = %v", err)
	}
	execSQL(t, path, `UPDATE running SET idx = 5`)
	if _, err := s.Load(t.Context(), "j"); err == nil || !strings.Contains(err.Error(), "index 0 stored as agent 5") {
		t.Errorf("Load of a mismatched running row = %v, want an error naming both indexes", err)
	}
}

// oldFailedLine is a failed state as version 0 of the state format wrote
// it, before failures were kept as a job.Failure: in six members.
const oldFailedLine = `{"job_id":"old","index":1,"input":{"id":8},"status":"failed","err_kind":"rate_limit","err_msg":"backend unavailable: no answer for 1m0s: openai: HTTP 429: llm: rate limited","err_op":"generate","err_turn":3,"err_class":"rate_limited,backend_unavailable","problems":[{"path":"$","message":"x"}],"messages":[{"role":"user","content":"hi"}],"turns":3,"model_calls":4,"retries":0,"corrections":0,"tool_calls":0,"usage":{"prompt_tokens":0,"completion_tokens":0},"timings":{"queue":0,"inference":0,"tools":0,"backoff":1000000000,"ttft":0,"total":61000000000}}`

// TestOldFailureFormat checks that a file holding a failed state of
// version 0 (its failure in err_kind, err_msg, err_op, err_turn, err_class
// and problems) loads with its failure, and that Summary counts its kind.
func TestOldFailureFormat(t *testing.T) {
	s, path := open(t, checkpoint.Config{FlushInterval: -1})
	ctx := t.Context()
	if err := s.Save(ctx, agent.State{JobID: "old", Index: 1, Status: agent.StatusDone}); err != nil {
		t.Fatal(err)
	}
	execSQL(t, path, `UPDATE finished SET states = ?, n = 1`, s2.Encode(nil, []byte(oldFailedLine+"\n")))
	states, err := s.Load(ctx, "old")
	if err != nil || len(states) != 1 {
		t.Fatalf("Load = %d states, %v; want the old one", len(states), err)
	}
	want := &job.Failure{Kind: job.KindRateLimit, Op: "generate", Turn: 3,
		Cause:    []job.Link{{Message: "backend unavailable: no answer for 1m0s: openai: HTTP 429: llm: rate limited", Class: "rate_limited,backend_unavailable"}},
		Problems: []schema.Problem{{Path: "$", Message: "x"}}}
	if diff := cmp.Diff(want, states[0].Failure); diff != "" {
		t.Errorf("loaded failure differs (-want +got):\n%s", diff)
	}
	st, err := s.State(ctx, "old", 1)
	if err != nil || len(st.Messages) != 1 || !cmp.Equal(want, st.Failure) {
		t.Errorf("State = %d messages, failure %+v, %v; want 1 message, failure %+v", len(st.Messages), st.Failure, err, want)
	}
	sm, err := s.Summary(ctx, "old")
	if err != nil || sm.ByKind["rate_limit"] != 1 {
		t.Errorf("Summary = %+v, %v; want one rate_limit failure", sm, err)
	}
}
