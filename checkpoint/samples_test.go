package checkpoint_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
)

// checkSamples fails t unless Samples(jobID) returns want: the same
// instants, and data as the same (compacted) JSON.
func checkSamples(t *testing.T, s *checkpoint.Store, jobID string, want ...checkpoint.Sample) {
	t.Helper()
	got, err := s.Samples(t.Context(), jobID)
	if err != nil {
		t.Fatalf("Samples(%q) = %v", jobID, err)
	}
	if diff := cmp.Diff(want, got, cmp.Transformer("string", func(r json.RawMessage) string { return string(r) })); diff != "" {
		t.Errorf("Samples(%q) mismatch (-want +got):\n%s", jobID, diff)
	}
}

// TestSamplesRoundTrip adds samples of two jobs between saves, closes the
// store and reads them back from the file opened read-only: in the order
// added, to the nanosecond, data compacted; none for a job without any.
func TestSamplesRoundTrip(t *testing.T) {
	s, path := open(t, checkpoint.Config{})
	ctx := t.Context()
	base := time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.FixedZone("", 3600))
	want := []checkpoint.Sample{
		{At: base, Data: json.RawMessage(`{"done":0,"in_flight":12,"limit":32}`)},
		{At: base.Add(time.Second + 1), Data: json.RawMessage(`{"done":5,"in_flight":12,"limit":16,"429s":3}`)},
		// Not in time order: the order added is kept.
		{At: base.Add(-time.Hour), Data: json.RawMessage(`[1,2.5e3,"x"]`)},
	}
	for i, sm := range want {
		if err := s.Save(ctx, fullState("j", i)); err != nil {
			t.Fatal(err)
		}
		in := sm
		if i == 1 {
			in.Data = json.RawMessage(" {\"done\" : 5,\n\"in_flight\":12, \"limit\":16, \"429s\":3} ")
		}
		if err := s.AddSample(ctx, "j", in); err != nil {
			t.Fatalf("AddSample(j, %d) = %v", i, err)
		}
	}
	other := checkpoint.Sample{At: base, Data: json.RawMessage(`{"other":true}`)}
	if err := s.AddSample(ctx, "other", other); err != nil {
		t.Fatal(err)
	}
	checkSamples(t, s, "j", want...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly = %v", err)
	}
	defer r.Close()
	checkSamples(t, r, "j", want...)
	checkSamples(t, r, "other", other)
	checkSamples(t, r, "none")
	checkStates(t, r, "j", fullState("j", 0), fullState("j", 1), fullState("j", 2))
	if err := r.AddSample(ctx, "j", want[0]); err == nil {
		t.Error("AddSample on a read-only store = nil, want an error")
	}
	checkSamples(t, r, "j", want...)
}

// TestAddSampleRefusesBadInput: data that is not one JSON value, or a
// sample without a time, is refused with an error naming the job, and
// nothing is stored; after Close AddSample returns ErrClosed.
func TestAddSampleRefusesBadInput(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	now := time.Now()
	for name, sm := range map[string]checkpoint.Sample{
		"empty data":   {At: now},
		"spaces":       {At: now, Data: json.RawMessage("  ")},
		"broken JSON":  {At: now, Data: json.RawMessage(`{"a":`)},
		"two values":   {At: now, Data: json.RawMessage(`{} {}`)},
		"no time":      {Data: json.RawMessage(`{}`)},
		"year 2300":    {At: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Data: json.RawMessage(`{}`)},
		"year 1000":    {At: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), Data: json.RawMessage(`{}`)},
		"invalid utf8": {At: now, Data: json.RawMessage("\"\xff")},
	} {
		t.Run(name, func(t *testing.T) {
			err := s.AddSample(t.Context(), "job-x", sm)
			if err == nil || !strings.Contains(err.Error(), `job "job-x"`) {
				t.Errorf("AddSample(%s) = %v, want an error naming the job", name, err)
			}
		})
	}
	checkSamples(t, s, "job-x")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSample(t.Context(), "j", checkpoint.Sample{At: now, Data: json.RawMessage(`1`)}); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("AddSample after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Samples(t.Context(), "j"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("Samples after Close = %v, want ErrClosed", err)
	}
}

// TestAddSampleWithSaves adds samples while many goroutines save states,
// through the same group-commit writer: every state and every sample is
// stored, the samples in the order added.
func TestAddSampleWithSaves(t *testing.T) {
	s, _ := open(t, checkpoint.Config{})
	ctx := t.Context()
	const (
		savers  = 8
		turns   = 40
		samples = 50
	)
	var wg sync.WaitGroup
	errs := make(chan error, savers+1) // one per goroutine at most
	for g := range savers {
		wg.Go(func() {
			for turn := 1; turn <= turns; turn++ {
				st := agent.State{JobID: "j", Index: g, Status: agent.StatusRunning, Turns: turn,
					Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint("task ", g)}}}
				if turn == turns {
					st.Status, st.Output = agent.StatusDone, json.RawMessage(`{}`)
				}
				if err := s.Save(ctx, st); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	base := time.Unix(1798700000, 0)
	var want []checkpoint.Sample
	for i := range samples {
		want = append(want, checkpoint.Sample{At: base.Add(time.Duration(i) * time.Millisecond), Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	wg.Go(func() {
		for _, sm := range want {
			if err := s.AddSample(ctx, "j", sm); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkSamples(t, s, "j", want...)
	states, err := s.Load(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != savers {
		t.Fatalf("Load = %d states, want %d", len(states), savers)
	}
	for _, st := range states {
		if st.Status != agent.StatusDone || st.Turns != turns {
			t.Errorf("agent %d: %s at turn %d, want done at turn %d", st.Index, st.Status, st.Turns, turns)
		}
	}
}

// format4SQL is the schema of a file of format 4, as batchagent wrote it
// before samples.
const format4SQL = `
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 0), next_seq INTEGER NOT NULL);
INSERT INTO meta (id, next_seq) VALUES (0, 1);
CREATE TABLE runs (job_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, inputs INTEGER, created INTEGER NOT NULL, updated INTEGER NOT NULL);
CREATE TABLE running (job_id TEXT NOT NULL, idx INTEGER NOT NULL, seq INTEGER NOT NULL, state BLOB NOT NULL, updated INTEGER NOT NULL, PRIMARY KEY (job_id, idx)) WITHOUT ROWID;
CREATE TABLE finished (seq INTEGER PRIMARY KEY, job_id TEXT NOT NULL, n INTEGER NOT NULL, states BLOB NOT NULL, updated INTEGER NOT NULL);
CREATE INDEX finished_by_job ON finished (job_id, seq);
CREATE TABLE forgotten (job_id TEXT NOT NULL, idx INTEGER NOT NULL, min_seq INTEGER NOT NULL, PRIMARY KEY (job_id, idx)) WITHOUT ROWID;
PRAGMA user_version = 4;`

// oldState is a running state as a batchagent of format 4 wrote it:
// without started or spans.
const oldState = `{"job_id":"j","index":0,"status":"running","messages":[{"role":"user","content":"task"},{"role":"assistant","content":"thinking"},{"role":"user","content":"go on"}],"turns":1,"model_calls":1,"retries":0,"corrections":0,"tool_calls":0,"usage":{"prompt_tokens":10,"completion_tokens":2},"timings":{"queue":1,"inference":2,"tools":0,"backoff":0,"ttft":3}}`

// format4File writes a file of format 4 holding oldState, and returns its
// path.
func format4File(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/v4.db"
	execSQL(t, path, format4SQL)
	execSQL(t, path, `INSERT INTO running (job_id, idx, seq, state, updated) VALUES ('j', 0, 1, ?, 1); UPDATE meta SET next_seq = 2`, []byte(oldState))
	return path
}

// oldStateLoaded is oldState as Load returns it.
var oldStateLoaded = agent.State{JobID: "j", Status: agent.StatusRunning, Turns: 1, ModelCalls: 1,
	Messages: []llm.Message{{Role: llm.RoleUser, Content: "task"}, {Role: llm.RoleAssistant, Content: "thinking"}, {Role: llm.RoleUser, Content: "go on"}},
	Usage:    llm.Usage{PromptTokens: 10, CompletionTokens: 2}, Timings: agent.Timings{Queue: 1, Inference: 2, TTFT: 3}}

// TestFormat4Upgraded opens a file of format 4 for writing: it becomes
// format 5, keeps its state (without spans), and takes samples.
func TestFormat4Upgraded(t *testing.T) {
	path := format4File(t)
	s, _ := reopen(t, path)
	if v := query[int](t, path, `PRAGMA user_version`); v != 5 {
		t.Errorf("user_version after the upgrade = %d, want 5", v)
	}
	checkStates(t, s, "j", oldStateLoaded)
	sm := checkpoint.Sample{At: time.Unix(1798700000, 7), Data: json.RawMessage(`{"ok":1}`)}
	if err := s.AddSample(t.Context(), "j", sm); err != nil {
		t.Fatalf("AddSample after the upgrade = %v", err)
	}
	checkSamples(t, s, "j", sm)
}

// TestFormat4ReadOnly reads a file of format 4 read-only: its states
// load, it has no samples (and no error), and it is not upgraded.
func TestFormat4ReadOnly(t *testing.T) {
	path := format4File(t)
	r, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly(format 4 file) = %v", err)
	}
	defer r.Close()
	checkStates(t, r, "j", oldStateLoaded)
	checkSamples(t, r, "j")
	if v := query[int](t, path, `PRAGMA user_version`); v != 4 {
		t.Errorf("user_version after a read-only open = %d, want 4", v)
	}
}
