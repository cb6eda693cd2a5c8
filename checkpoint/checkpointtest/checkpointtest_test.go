package checkpointtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memory is the reference Checkpointer: states kept as their JSON, by job
// and index, read back with UseNumber; final states come back without
// their conversation, as *checkpoint.Store returns them.
type memory struct {
	mu     sync.Mutex                // protects states
	states map[string]map[int][]byte // job → index → the state's JSON

	// The ways broken implementations break, for TestSuiteFindsBrokenCheckpointers.
	roundNumbers   bool // decode without UseNumber
	dropIndex      bool // every state comes back as index 0
	ignoreJobID    bool // all jobs share one set of states
	keepFirst      bool // a later Save does not replace an earlier one
	dropProblems   bool // failed states lose their schema problems
	dropTotal      bool // Timings.Total is not kept
	dropSpans      bool // Started and Spans are not kept
	dropRunningMsg bool // running states lose their conversation
	retain         bool // the state is kept as given, not copied
	kept           map[string]map[int]agent.State
}

func (m *memory) Save(ctx context.Context, s agent.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	jobID := s.JobID
	if m.ignoreJobID {
		jobID = ""
	}
	if m.retain {
		if m.kept == nil {
			m.kept = map[string]map[int]agent.State{}
		}
		if m.kept[jobID] == nil {
			m.kept[jobID] = map[int]agent.State{}
		}
		m.kept[jobID][s.Index] = s
		return nil
	}
	if m.dropProblems && s.Failure != nil {
		f := *s.Failure
		f.Problems = nil
		s.Failure = &f
	}
	if m.dropTotal {
		s.Timings.Total = 0
	}
	if m.dropSpans {
		s.Started, s.Spans = time.Time{}, nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("memory: save job %q agent %d: %w", s.JobID, s.Index, err)
	}
	if m.states == nil {
		m.states = map[string]map[int][]byte{}
	}
	if m.states[jobID] == nil {
		m.states[jobID] = map[int][]byte{}
	}
	if _, ok := m.states[jobID][s.Index]; ok && m.keepFirst {
		return nil
	}
	m.states[jobID][s.Index] = data
	return nil
}

func (m *memory) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ignoreJobID {
		jobID = ""
	}
	if m.retain {
		return slices.Collect(maps.Values(m.kept[jobID])), nil
	}
	var out []agent.State
	for _, idx := range slices.Sorted(maps.Keys(m.states[jobID])) {
		dec := json.NewDecoder(bytes.NewReader(m.states[jobID][idx]))
		dec.UseNumber()
		var st agent.State
		if err := dec.Decode(&st); err != nil {
			return nil, fmt.Errorf("memory: load job %q agent %d: %w", jobID, idx, err)
		}
		if m.roundNumbers {
			for k, v := range st.Input {
				st.Input[k] = round(v)
			}
		}
		if st.Status != agent.StatusRunning || m.dropRunningMsg {
			st.Messages = nil
		}
		if m.dropIndex {
			st.Index = 0
		}
		out = append(out, st)
	}
	return out, nil
}

// round turns the numbers of v that a float64 holds into float64, as a
// decoder without UseNumber would.
func round(v any) any {
	switch v := v.(type) {
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			return f
		}
	case []any:
		for i := range v {
			v[i] = round(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = round(v[k])
		}
	}
	return v
}

// asyncMemory is memory with SaveAsync.
type asyncMemory struct {
	memory
	doneTwice bool // broken: done is called twice
	wg        sync.WaitGroup
}

func (m *asyncMemory) SaveAsync(s *agent.State, done func(error)) {
	cp := *s // a copy made before returning, as the caller may go on
	cp.Messages = slices.Clone(s.Messages)
	m.wg.Go(func() {
		err := m.Save(context.Background(), cp)
		done(err)
		if m.doneTwice {
			done(err)
		}
	})
}

func TestReference(t *testing.T) {
	Run(t, func(t *testing.T) batchagent.Checkpointer { return &memory{} })
}

func TestReferenceAsync(t *testing.T) {
	Run(t, func(t *testing.T) batchagent.Checkpointer {
		m := &asyncMemory{}
		t.Cleanup(m.wg.Wait)
		return m
	})
}

// recorder is a testing.TB that records failures instead of failing the
// test: a broken Checkpointer must make the suite fail, and the test that
// checks this must pass. Everything else goes to the real T.
type recorder struct {
	testing.TB
	mu     sync.Mutex // protects failed and msgs
	failed bool
	msgs   []string
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, msg)
}

func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Fail()                             { r.fail("Fail") }
func (r *recorder) FailNow()                          { r.fail("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any)                 { runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any) { runtime.Goexit() }
func (r *recorder) SkipNow()                         { runtime.Goexit() }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runRecorded runs case tc against c in a goroutine of its own (Fatal ends
// it) and returns what it reported.
func runRecorded(t *testing.T, tc testCase, c batchagent.Checkpointer) (failed bool, msgs []string) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tc.run(r, c)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, r.msgs
}

// maybe marks a case that may or may not catch a broken Checkpointer.
const maybe = "\x00maybe"

// TestSuiteFindsBrokenCheckpointers runs the suite against Checkpointers
// each broken one way and checks that the cases that must catch it fail,
// with a message that says what is wrong, and that the others pass.
func TestSuiteFindsBrokenCheckpointers(t *testing.T) {
	tests := []struct {
		name string
		open func() batchagent.Checkpointer
		// failing maps each case that must fail to a phrase its messages
		// must hold, or to maybe when whether it fails depends on timing;
		// every other case must pass.
		failing map[string]string
	}{
		{"rounds numbers", func() batchagent.Checkpointer { return &memory{roundNumbers: true} }, map[string]string{
			"exact_inputs":       "json.Number",
			"large_states":       "Input",
			"running_round_trip": "Input",
			"final_round_trip":   "Input",
			"result_round_trip":  "Input",
			"jobs_apart":         "Input",
			"indexes":            "Input",
			"caller_owns_state":  "Input",
			"concurrent_saves":   "not a saved state",
			"cancelled_context":  "Input",
			"replace":            "Input",
			"resume_run":         "restored 0 results",
		}},
		{"drops Index", func() batchagent.Checkpointer { return &memory{dropIndex: true} }, map[string]string{
			"running_round_trip": "want exactly index 3",
			"final_round_trip":   "two states of index 0",
			"result_round_trip":  "two states of index 0",
			"exact_inputs":       "two states of index 0",
			"replace":            "want exactly index 5",
			"jobs_apart":         "two states of index 0",
			"indexes":            "two states of index 0",
			"large_states":       "two states of index 0",
			"caller_owns_state":  "two states of index 0",
			"concurrent_saves":   "not a saved state",
			"resume_run":         "two states of index 0",
			"old_format":         "two states of index 0",
		}},
		{"ignores job IDs", func() batchagent.Checkpointer { return &memory{ignoreJobID: true} }, map[string]string{
			"jobs_apart":       "want 0 and",
			"concurrent_saves": "which was never saved",
		}},
		{"keeps the first save", func() batchagent.Checkpointer { return &memory{keepFirst: true} }, map[string]string{
			"replace":          "after save 2",
			"concurrent_saves": "had returned before Load began",
			"resume_run":       "delivered its result",
		}},
		{"drops problems", func() batchagent.Checkpointer { return &memory{dropProblems: true} }, map[string]string{
			"final_round_trip":  "Problems",
			"large_states":      "Problems",
			"result_round_trip": "Problems",
			"replace":           "after save 5",
			"caller_owns_state": "failed state",
			"resume_run":        "Problems",
			"old_format":        "Problems",
		}},
		{"drops Timings.Total", func() batchagent.Checkpointer { return &memory{dropTotal: true} }, map[string]string{
			"final_round_trip":  "Total",
			"large_states":      "Total",
			"result_round_trip": "Total",
			"replace":           "after save 3",
			"indexes":           "Total",
			"jobs_apart":        "Total",
			"caller_owns_state": "Total",
			// Whether a Load during the saves catches a final state is a
			// race; the check after them always does, and both name Total.
			"concurrent_saves": "Total",
			"old_format":       `"total_s":0`,
		}},
		{"drops spans", func() batchagent.Checkpointer { return &memory{dropSpans: true} }, map[string]string{
			"running_round_trip": "Spans",
			"final_round_trip":   "Spans",
			"result_round_trip":  "Spans",
			"replace":            "after save 5",
			"large_states":       "Spans",
			"caller_owns_state":  "Spans",
			"resume_run":         "result differs from a fresh run's",
		}},
		{"drops running conversations", func() batchagent.Checkpointer { return &memory{dropRunningMsg: true} }, map[string]string{
			"running_round_trip": "the engine resumes from them",
			"large_states":       "Messages",
			"replace":            "Messages",
			"jobs_apart":         "Messages",
			"indexes":            "Messages",
			"caller_owns_state":  "Messages",
			"concurrent_saves":   maybe, // when a Load sees an agent between turns
			"cancelled_context":  "Messages",
			"resume_run":         "model calls",
		}},
		{"retains the caller's state", func() batchagent.Checkpointer { return &memory{retain: true} }, map[string]string{
			"caller_owns_state": "changed by the caller",
		}},
		{"calls done twice", func() batchagent.Checkpointer { return &asyncMemory{doneTwice: true} }, map[string]string{
			"save_async": "done called 2 times",
			"resume_run": "more than once per state",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, tc := range cases {
				c := tt.open()
				failed, msgs := runRecorded(t, tc, c)
				if am, ok := c.(*asyncMemory); ok {
					am.wg.Wait()
				}
				phrase, mustFail := tt.failing[tc.name]
				all := strings.Join(msgs, "\n")
				switch {
				case phrase == maybe:
				case mustFail && !failed:
					t.Errorf("case %s passed a Checkpointer that %s, want it to fail", tc.name, tt.name)
				case mustFail && !strings.Contains(all, phrase):
					t.Errorf("case %s failed a Checkpointer that %s without saying %q:\n%.3000s", tc.name, tt.name, phrase, all)
				case !mustFail && failed:
					t.Errorf("case %s failed a Checkpointer that only %s, want it to pass:\n%.3000s", tc.name, tt.name, all)
				}
			}
		})
	}
}
