package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
)

// smallJob writes a job of n one-turn agents on the simulator.
func smallJob(t *testing.T, n int) (dir, job, in string) {
	t.Helper()
	dir = t.TempDir()
	job = writeFile(t, dir, "job.yaml", `backend: "sim://?seed=2&tool_turns=0"
task: "Item {id}"
output_schema:
  type: object
  properties: {value: {type: integer}}
  required: [value]
`)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	return dir, job, writeFile(t, dir, "in.jsonl", b.String())
}

// editFile replaces old with new in the file at path.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s lacks %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// savedStates returns the states of job "job" in the state file at path.
func savedStates(t *testing.T, path string) []agent.State {
	t.Helper()
	s, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	states, err := s.Load(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	return states
}

// TestForceRerunsResultsOfAnEditedJob edits the job's task after a run:
// the plain rerun is refused naming --force and --restart, and --force
// runs every input again (the results of the old task are stale), where it
// used to restore them all byte for byte.
func TestForceRerunsResultsOfAnEditedJob(t *testing.T) {
	const n = 20
	dir, job, in := smallJob(t, n)
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	editFile(t, job, "Item {id}", "Describe item {id}")
	code, _, stderr := run(t, t.Context(), args...)
	if code != 2 || !strings.Contains(stderr, "changed since its last run: task") || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "--restart") {
		t.Errorf("rerun of an edited job: exit %d, stderr:\n%s\nwant exit 2 naming the task, --force and --restart", code, stderr)
	}
	code, _, stderr = run(t, t.Context(), append(args, "--force")...)
	if code != 0 {
		t.Fatalf("rerun with --force: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "restored from the state file") || !strings.Contains(stderr, fmt.Sprintf("%d results in ", n)) {
		t.Errorf("rerun with --force of an edited job restored results of the old task; summary:\n%s\nwant all %d run", stderr, n)
	}
	checkOneLineEach(t, out, n)
	// Now the state holds the new job's results: the same command restores them.
	code, _, stderr = run(t, t.Context(), args...)
	if code != 0 || !strings.Contains(stderr, fmt.Sprintf("%d restored from the state file; 0 run", n)) {
		t.Errorf("rerun after the forced run: exit %d, summary:\n%s\nwant %d restored, 0 run", code, stderr, n)
	}
}

// TestChangedInputRefusalNamesRestart changes an input after a run: the
// refusal names both ways on, --force and --restart.
func TestChangedInputRefusalNamesRestart(t *testing.T) {
	dir, job, in := smallJob(t, 5)
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out, "--quiet"}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	editFile(t, in, `{"id":3}`, `{"id":33}`)
	code, _, stderr := run(t, t.Context(), args...)
	if code != 2 || !strings.Contains(stderr, "input 3 differs") || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "--restart") {
		t.Errorf("rerun with a changed input: exit %d, stderr:\n%s\nwant exit 2 naming input 3, --force and --restart", code, stderr)
	}
}

// TestRestartMovesOutputAndStateAside runs a job, then runs it again with
// --restart, twice: each restart moves the output and the state file aside
// to the next free number, byte for byte, and runs every input afresh.
func TestRestartMovesOutputAndStateAside(t *testing.T) {
	const n = 20
	dir, job, in := smallJob(t, n)
	out := filepath.Join(dir, "out.jsonl")
	state := out + ".state.db"
	args := []string{"run", job, "--inputs", in, "--out", out}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		code, _, stderr := run(t, t.Context(), append(args, "--restart")...)
		if code != 0 {
			t.Fatalf("--restart %d: exit %d\n%s", i, code, stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("moved %s to %s.%d", out, out, i),
			fmt.Sprintf("moved %s to %s.%d", state, state, i),
			fmt.Sprintf("%d results in ", n),
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("--restart %d: stderr lacks %q:\n%s", i, want, stderr)
			}
		}
		if strings.Contains(stderr, "restored from the state file") {
			t.Errorf("--restart %d restored results:\n%s", i, stderr)
		}
		checkOneLineEach(t, out, n)
		if got := len(savedStates(t, fmt.Sprintf("%s.%d", state, i))); got != n {
			t.Errorf("%s.%d holds %d states, want the %d of the run before", state, i, got, n)
		}
	}
	if b, err := os.ReadFile(out + ".1"); err != nil || !bytes.Equal(b, first) {
		t.Errorf("%s.1 = %q (err %v), want the first run's output byte for byte", out, b, err)
	}
	if _, err := os.Stat(out + ".2"); err != nil {
		t.Errorf("second --restart: %v", err)
	}
}

// TestRestartAfterKillKeepsTheLog kills a run with SIGKILL, leaving its
// state file's write-ahead log beside it, and restarts: the state file
// moved aside still holds every result of the killed run's output (its log
// moved with it), and the new run does not pick up the old log.
func TestRestartAfterKillKeepsTheLog(t *testing.T) {
	const n = 300
	dir, job, in, backend := slowJob(t, n)
	out := filepath.Join(dir, "out.jsonl")
	state := out + ".state.db"
	args := []string{"run", job, "--inputs", in, "--out", out, "--quiet"}
	c := startChild(t, append(args, "--backend", backend)...)
	waitUntil(t, "10 results", func() bool {
		b, _ := os.ReadFile(out)
		return bytes.Count(b, []byte("\n")) >= 10
	})
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.wait()
	if _, err := os.Stat(state + "-wal"); err != nil {
		t.Fatalf("no write-ahead log beside the state file after SIGKILL (%v): the test proves nothing", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	killed := readLines(t, string(b[:bytes.LastIndexByte(b, '\n')+1]))
	if code, _, stderr := run(t, t.Context(), append(args, "--backend", "sim://?seed=4&tool_turns=0", "--restart")...); code != 0 {
		t.Fatalf("--restart after SIGKILL: exit %d\n%s", code, stderr)
	}
	checkOneLineEach(t, out, n)
	done := map[int]bool{}
	for _, st := range savedStates(t, state+".1") {
		done[st.Index] = st.Status == agent.StatusDone
	}
	for _, l := range killed {
		if !done[l.Index] {
			t.Errorf("index %d has a line in the killed run's output, but no done state in %s.1", l.Index, state)
		}
	}
	if got := len(savedStates(t, state)); got != n {
		t.Errorf("the new state file holds %d states, want %d", got, n)
	}
}

// TestRestartContradictions gives --restart with flags it contradicts.
func TestRestartContradictions(t *testing.T) {
	dir, job, in := smallJob(t, 2)
	out := filepath.Join(dir, "out.jsonl")
	tests := []struct {
		flag []string
		want string
	}{
		{[]string{"--force"}, "--restart and --force contradict each other"},
		{[]string{"--retry-failed"}, "--restart and --retry-failed contradict each other"},
		{[]string{"--dry-run"}, "--dry-run and --restart contradict each other"},
		{[]string{"--redis", "redis://127.0.0.1:1"}, "--redis and --restart contradict each other"},
		{[]string{"--openai-batch", in}, "--openai-batch and --restart contradict each other"},
	}
	for _, tt := range tests {
		t.Run(tt.flag[0], func(t *testing.T) {
			args := append([]string{"run", "--inputs", in, "--out", out, "--restart"}, tt.flag...)
			if tt.flag[0] != "--openai-batch" {
				args = append(args, job)
			}
			code, _, stderr := run(t, t.Context(), args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}
