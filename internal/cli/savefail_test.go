package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
)

// fsizeEnv, set for a child process, limits the size of the files it
// writes (RLIMIT_FSIZE): a write past the limit fails with EFBIG, as on a
// full disk.
const fsizeEnv = "BATCHAGENT_CLI_FSIZE"

// limitFileSize applies fsizeEnv to this process.
func limitFileSize() {
	v := os.Getenv(fsizeEnv)
	if v == "" {
		return
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err == nil {
		err = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "limit file size:", err)
		os.Exit(3)
	}
}

// TestFullStateDiskStopsRun runs with the state file unable to grow past
// 128 KiB: saves fail mid-run, and the run must stop with the status of an
// I/O failure, having written no result whose state was not saved; the
// resume then completes the run with one line per input.
func TestFullStateDiskStopsRun(t *testing.T) {
	const n = 300
	dir, job, in, _ := slowJob(t, n)
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out, "--backend", "sim://?latency=2ms&seed=4&tool_turns=0", "--quiet"}
	c := startChildEnv(t, []string{fsizeEnv + "=131072"}, args...)
	code := c.wait()
	stderr := c.stderr.String()
	if code != 1 || !strings.Contains(stderr, "saves failed") || !strings.Contains(stderr, out+".state.db") {
		t.Errorf("run on a full state disk: exit %d, stderr %q; want 1 naming the state file's failed saves", code, stderr)
	}

	store, err := checkpoint.Open(out+".state.db", checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	states, err := store.Load(t.Context(), "job")
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	saved := map[int]agent.State{}
	for _, st := range states {
		saved[st.Index] = st
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	for _, l := range lines {
		if st, ok := saved[l.Index]; !ok || st.Status != agent.StatusDone {
			t.Errorf("line of index %d written, but its saved state is %q (found: %v)", l.Index, st.Status, ok)
		}
	}
	if len(lines) == n {
		t.Fatalf("every result was written: the state file never filled up, the test proves nothing")
	}
	t.Logf("%d lines written, %d states saved before the disk filled", len(lines), len(states))

	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	checkOneLineEach(t, out, n)
}

// checkInOrder checks that the results file holds one line per index
// 0..n-1, in index order.
func checkInOrder(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	var wrong []string
	for i, l := range lines {
		if l.Index != i {
			wrong = append(wrong, fmt.Sprintf("line %d holds index %d", i+1, l.Index))
		}
	}
	if len(lines) != n || len(wrong) > 0 {
		t.Errorf("%s: %d lines for %d inputs; %d out of order, first: %q", path, len(lines), n, len(wrong), wrong[:min(len(wrong), 5)])
	}
}

// TestResumeAfterSIGTERMRestoresInvariants stops a run of multi-turn
// agents with a real SIGTERM, duplicates a line of its output, and
// resumes: the final output holds exactly one line per input and, with
// --ordered, the lines are in input order.
func TestResumeAfterSIGTERMRestoresInvariants(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			dir := t.TempDir()
			job, in := resumeJob(t, dir)
			out := filepath.Join(dir, "out.jsonl")
			args := []string{"run", job, "--inputs", in, "--out", out, "--backend", "sim://?latency=10ms&jitter=0.9&seed=3", "--quiet"}
			if ordered {
				args = append(args, "--ordered")
			}
			c := startChild(t, args...)
			waitUntil(t, "30 results", func() bool {
				b, _ := os.ReadFile(out)
				return bytes.Count(b, []byte("\n")) >= 30
			})
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := c.wait(); code != 130 {
				t.Fatalf("exit %d after SIGTERM, want 130\n%s", code, c.stderr.String())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(b, []byte("\n"))
			f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Write(append(first, '\n'))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := run(t, t.Context(), args...); code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, stderr)
			}
			checkOneLineEach(t, out, resumeInputs)
			if ordered {
				checkInOrder(t, out, resumeInputs)
			}
		})
	}
}
