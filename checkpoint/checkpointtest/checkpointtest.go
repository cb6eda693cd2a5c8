// Package checkpointtest is the conformance suite every
// [batchagent.Checkpointer] passes, following the pattern of
// testing/slogtest: [Run] checks, case by case, what the engine relies on
// when it saves agents' progress and resumes a run from it — every field
// of a state round-trips (a final state may come back without its
// conversation), a state saved in an older format still rebuilds its
// result, inputs come back as their exact JSON, a later Save of an
// agent replaces the earlier one, job IDs keep runs apart, Saves from many
// goroutines at once, a cancelled context, the optional SaveAsync, and a
// whole run on the in-process simulator cancelled mid-way and resumed by a
// second [batchagent.Engine].
//
// A Checkpointer's tests run it like this, one empty Checkpointer per case:
//
//	func TestConformance(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) batchagent.Checkpointer {
//			s, err := checkpoint.Open(filepath.Join(t.TempDir(), "run.db"), checkpoint.Config{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks one Checkpointer value at a time: that a state survives
// a closed and reopened store, or a crash, is each implementation's own
// test (checkpoint's crash test kills a process that saves).
//
// It is imported only from _test.go files.
package checkpointtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
)

// AsyncSaver is the optional method the engine discovers on a
// Checkpointer by type assertion: SaveAsync records s without making the
// caller wait and calls done exactly once, without blocking, when s is
// durable (nil) or could not be saved. It reads *s before it returns and
// keeps nothing of it. When the Checkpointer under test has it, the suite
// checks it too.
type AsyncSaver interface {
	SaveAsync(s *agent.State, done func(error))
}

// callTimeout bounds each call the suite makes: a Checkpointer that hangs
// fails the case instead of the whole test binary's timeout.
const callTimeout = 30 * time.Second

// A testCase is one named check of the contract. It reports through t,
// which is the subtest's *testing.T under Run.
type testCase struct {
	name string
	run  func(t testing.TB, c batchagent.Checkpointer)
}

// cases lists the suite's checks in the order Run runs them.
var cases = []testCase{
	{"empty_job", testEmptyJob},
	{"running_round_trip", testRunningRoundTrip},
	{"final_round_trip", testFinalRoundTrip},
	{"result_round_trip", testResultRoundTrip},
	{"old_format", testOldFormat},
	{"exact_inputs", testExactInputs},
	{"replace", testReplace},
	{"jobs_apart", testJobsApart},
	{"indexes", testIndexes},
	{"large_states", testLargeStates},
	{"caller_owns_state", testCallerOwnsState},
	{"concurrent_saves", testConcurrentSaves},
	{"cancelled_context", testCancelledContext},
	{"save_async", testSaveAsync},
	{"resume_run", testResumeRun},
}

// Run runs the suite, each case as a subtest of t with a Checkpointer of
// its own from open. open must return an empty Checkpointer (one that holds
// no states, for any job) and arrange with t.Cleanup for it to be closed;
// it may call t.Fatal when it cannot. Cases run one after the other.
func Run(t *testing.T, open func(t *testing.T) batchagent.Checkpointer) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, open(t))
		})
	}
}

// ctxOf returns a context for one call: t's, bounded by callTimeout.
func ctxOf(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// save saves st and fails t when Save fails.
func save(t testing.TB, c batchagent.Checkpointer, st agent.State) {
	t.Helper()
	if err := c.Save(ctxOf(t), st); err != nil {
		t.Fatalf("Save(job %q, index %d, %s) = %v, want nil", st.JobID, st.Index, st.Status, err)
	}
}

// load loads jobID's states by index, failing t when Load fails or returns
// two states of one index.
func load(t testing.TB, c batchagent.Checkpointer, jobID string) map[int]agent.State {
	t.Helper()
	states, err := c.Load(ctxOf(t), jobID)
	if err != nil {
		t.Fatalf("Load(%q) = %v, want nil", jobID, err)
	}
	m := make(map[int]agent.State, len(states))
	for _, st := range states {
		if _, dup := m[st.Index]; dup {
			t.Errorf("Load(%q) returned two states of index %d, want only the latest", jobID, st.Index)
		}
		m[st.Index] = st
	}
	return m
}

// loadOne loads jobID's states and returns the one of index idx, failing t
// unless it is the only one.
func loadOne(t testing.TB, c batchagent.Checkpointer, jobID string, idx int) agent.State {
	t.Helper()
	m := load(t, c, jobID)
	st, ok := m[idx]
	if !ok || len(m) != 1 {
		t.Fatalf("Load(%q) = states of indexes %v, want exactly index %d", jobID, slices.Sorted(maps.Keys(m)), idx)
	}
	return st
}

// stateOpts compare states as the contract does: nil and empty slices and
// maps alike, and JSON values (Output, tool arguments) as JSON, so that a
// Checkpointer may compact them.
var stateOpts = cmp.Options{
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() != reflect.TypeFor[json.RawMessage]() }, cmpopts.EquateEmpty()),
	cmp.Transformer("compactJSON", func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return ""
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return string(raw) // not JSON (malformed tool arguments): byte for byte
		}
		b, err := json.Marshal(v)
		if err != nil {
			return string(raw)
		}
		return string(b)
	}),
}

// checkState fails t unless got is want, as loaded: a final state may come
// back without its Messages, a running one must come back whole.
func checkState(t testing.TB, what string, want, got agent.State) {
	t.Helper()
	if want.Status != agent.StatusRunning && got.Messages == nil {
		want.Messages = nil
	}
	if diff := cmp.Diff(want, got, stateOpts); diff != "" {
		t.Errorf("%s: loaded state differs from the saved one (-saved +loaded):\n%.4000s", what, diff)
	}
}

// describe names a state for failure messages.
func describe(st agent.State) string {
	return fmt.Sprintf("job %q index %d (%s, turn %d)", st.JobID, st.Index, st.Status, st.Turns)
}
