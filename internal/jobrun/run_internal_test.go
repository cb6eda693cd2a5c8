package jobrun

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
)

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// TestRunnerCloseLabelsErrors checks that close closes everything once and
// labels each error with what failed to close.
func TestRunnerCloseLabelsErrors(t *testing.T) {
	closed := 0
	ok := closeFunc(func() error { closed++; return nil })
	fail := func(msg string) closeFunc {
		return func() error { closed++; return errors.New(msg) }
	}
	r := &Run{closers: []namedCloser{{"inputs", ok}, {"state", fail("commit failed")}, {"output", fail("quota exceeded")}}}
	err := r.Close()
	if want := "state: commit failed\noutput: quota exceeded"; err == nil || err.Error() != want {
		t.Errorf("close() = %v, want %q", err, want)
	}
	if err := r.Close(); err != nil || closed != 3 {
		t.Errorf("second close() = %v after %d closes, want nil after 3", err, closed)
	}
}

// TestToolsClosedWithTheRunner checks that a file tool's roots are among
// what the runner closes, and that a tool's close error is kept as a
// warning, not the run's error.
func TestToolsClosedWithTheRunner(t *testing.T) {
	b, err := (&config.Job{Tools: []config.Tool{{Name: "read_file", Settings: &filetool.ReadFileConfig{Roots: []string{t.TempDir()}}}}}).OpenTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Closers) != 1 {
		t.Fatalf("%d closers for one read_file tool, want its roots", len(b.Closers))
	}
	b.Closers = append(b.Closers, closeFunc(func() error { return errors.New("server exited with status 1") }))
	r := &Run{tools: b}
	if err := r.Close(); err != nil || r.toolsErr == nil || !strings.Contains(r.toolsErr.Error(), "status 1") {
		t.Errorf("close() = %v, tools error %v; want nil and the server's status", err, r.toolsErr)
	}
	if _, err := b.Tools[0].Call(t.Context(), json.RawMessage(`{"path":"x"}`)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("read_file after close: %v, want a closed error", err)
	}
}

func TestSummaryShowsCheckpointErrors(t *testing.T) {
	var b strings.Builder
	writeSummary(&b, summary{name: "job", st: batchagent.Stats{Done: 3, OK: 3, CheckpointErrors: 2}, wall: time.Second, notWritten: 0, written: 3, outPath: "out.jsonl", limitSource: "test"})
	if !strings.Contains(b.String(), "checkpoint: 2 saves failed") {
		t.Errorf("summary lacks the failed saves:\n%s", b.String())
	}
	b.Reset()
	writeSummary(&b, summary{name: "job", st: batchagent.Stats{Done: 3, OK: 3}, wall: time.Second, notWritten: 0, written: 3, outPath: "out.jsonl", limitSource: "test"})
	if strings.Contains(b.String(), "checkpoint:") {
		t.Errorf("summary of a run without failed saves mentions them:\n%s", b.String())
	}
}

// TestInterruptedSummaryRate: agents stopped by an interrupt are not
// results and do not count in agents/s.
func TestInterruptedSummaryRate(t *testing.T) {
	var b strings.Builder
	st := batchagent.Stats{Started: 10, Done: 10, OK: 4, Failed: 6, ByKind: map[batchagent.Kind]int64{batchagent.KindCanceled: 6}}
	writeSummary(&b, summary{name: "job", st: st, wall: 2 * time.Second, notWritten: 6, written: 4, outPath: "out.jsonl", limitSource: "test"})
	for _, want := range []string{"4 results in 2s (2.0 agents/s)", "ok 4 · failed 0", "interrupted: 6 agents"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// TestSummaryShowsTiers: a run whose results came from fallback tiers
// says so; a run answered by its model alone has no tier line.
func TestSummaryShowsTiers(t *testing.T) {
	var b strings.Builder
	writeSummary(&b, summary{name: "job", st: batchagent.Stats{Done: 5, OK: 5, ByTier: map[int]int64{0: 3, 2: 2}, BreakerChanges: 1}, wall: time.Second, notWritten: 0, written: 5, outPath: "out.jsonl", limitSource: "test"})
	if !strings.Contains(b.String(), "answered by tier 0: 3, tier 2: 2 · breaker changes 1") {
		t.Errorf("summary lacks the tiers:\n%s", b.String())
	}
	b.Reset()
	writeSummary(&b, summary{name: "job", st: batchagent.Stats{Done: 3, OK: 3, ByTier: map[int]int64{0: 3}}, wall: time.Second, notWritten: 0, written: 3, outPath: "out.jsonl", limitSource: "test"})
	if strings.Contains(b.String(), "answered by") {
		t.Errorf("summary of a run without fallbacks shows tiers:\n%s", b.String())
	}
}

// TestSummaryShowsPacks: a run whose agents were packed says how many
// calls answered how many results, and how many ran alone.
func TestSummaryShowsPacks(t *testing.T) {
	var b strings.Builder
	writeSummary(&b, summary{name: "job", st: batchagent.Stats{Done: 40, OK: 40, ModelCalls: 5, PackCalls: 3, Packed: 38, PackAlone: 2}, wall: time.Second, notWritten: 0, written: 40, outPath: "out.jsonl", limitSource: "test"})
	if !strings.Contains(b.String(), "packed: 38 results from 3 calls · 2 ran alone") {
		t.Errorf("summary lacks the packs:\n%s", b.String())
	}
	b.Reset()
	writeSummary(&b, summary{name: "job", st: batchagent.Stats{Done: 3, OK: 3, ModelCalls: 3}, wall: time.Second, notWritten: 0, written: 3, outPath: "out.jsonl", limitSource: "test"})
	if strings.Contains(b.String(), "packed") {
		t.Errorf("summary of an unpacked run mentions packs:\n%s", b.String())
	}
}

// TestSummaryShowsToolErrors: a run whose tool calls failed says so next
// to its agents, per tool when there are several, so that "ok 20" does
// not read as a clean run; a run without tool errors has no such row.
func TestSummaryShowsToolErrors(t *testing.T) {
	var b strings.Builder
	st := batchagent.Stats{Done: 20, OK: 20, ToolCalls: 20, ToolExecuted: 20, Tools: []tool.Stats{
		{Name: "lookup", Requested: 8, Executed: 8, Errors: 5}, {Name: "fetch", Requested: 10, Executed: 10, Errors: 7},
		{Name: "lookup", Requested: 2, Executed: 2, Errors: 2}}}
	writeSummary(&b, summary{name: "job", st: st, wall: time.Second, written: 20, outPath: "out.jsonl", limitSource: "test", state: "out.jsonl.state.db"})
	for _, want := range []string{
		"\n       agents: ok 20 · failed 0\n  tool errors: 14 of 20 tool calls failed (lookup 7, fetch 7); see batchagent status --agent N\n",
		"\n   tool calls: requested 20, executed 20, errors 14\n",
		"\n       lookup: requested 10, executed 10, coalesced 0, cache hits 0, errors 7\n",
		"\n        state: out.jsonl.state.db\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	st.Tools = []tool.Stats{{Name: "lookup", Requested: 20, Executed: 20}}
	writeSummary(&b, summary{name: "job", st: st, wall: time.Second, written: 20, outPath: "out.jsonl", limitSource: "test"})
	if strings.Contains(b.String(), "tool errors") || !strings.Contains(b.String(), "tool calls: requested 20, executed 20, errors 0") {
		t.Errorf("summary of a run without tool errors:\n%s", b.String())
	}
}
