package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// child is a batchagent process started by a test.
type child struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

// startChild runs the CLI with args in a new process (the test binary,
// re-executed); wait reaps it.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	return startChildEnv(t, nil, args...)
}

// startChildEnv is startChild with env added to the process's environment.
func startChildEnv(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0])}
	c.cmd.Env = append(append(os.Environ(), env...), childEnv+"="+strings.Join(args, "\x1f"))
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// wait waits for the process to end and returns its exit status.
func (c *child) wait() int {
	_ = c.cmd.Wait() // the status says how it ended
	return c.cmd.ProcessState.ExitCode()
}

// waitUntil polls cond until it holds, failing the test after 20s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowJob writes a job of n one-call agents, two at a time, on a sim
// backend answering in 40ms: a run of 40 takes about a second.
func slowJob(t *testing.T, n int) (dir, job, in, backend string) {
	t.Helper()
	dir = t.TempDir()
	job = writeFile(t, dir, "job.yaml", `task: "Item {id}"
output_schema:
  type: object
  properties: {value: {type: integer}}
  required: [value]
limits:
  max_active: 2
`)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	return dir, job, writeFile(t, dir, "in.jsonl", b.String()), "sim://?latency=40ms&seed=4&tool_turns=0"
}

// checkOneLineEach checks that the results file holds exactly one valid,
// successful line per input index 0..n-1.
func checkOneLineEach(t *testing.T, path string, n int) []line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	seen := map[int]int{}
	for _, l := range lines {
		seen[l.Index]++
		if l.Error != nil || l.Output == nil {
			t.Errorf("%s: line of index %d has error %+v, output %v", path, l.Index, l.Error, l.Output)
		}
	}
	for i := range n {
		if seen[i] != 1 {
			t.Errorf("%s: index %d has %d lines, want 1", path, i, seen[i])
		}
	}
	if len(lines) != n {
		t.Errorf("%s: %d lines, want %d", path, len(lines), n)
	}
	return lines
}

// TestConcurrentRunsOnOneOutput starts a second run on the output of a
// run in progress: it exits 2 at once naming the first run's process, and
// the first run's output is intact.
func TestConcurrentRunsOnOneOutput(t *testing.T) {
	const n = 200 // 4 s of model calls: the first run is still running when a loaded machine starts the second
	dir, job, in, backend := slowJob(t, n)
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out, "--backend", backend, "--quiet"}
	a := startChild(t, args...)
	waitUntil(t, "the first run's first results", func() bool {
		b, _ := os.ReadFile(out)
		return bytes.Count(b, []byte("\n")) >= 2
	})
	b := startChild(t, args...)
	if code := b.wait(); code != 2 || !strings.Contains(b.stderr.String(), "in use by another run") ||
		!strings.Contains(b.stderr.String(), fmt.Sprintf("pid %d ", a.cmd.Process.Pid)) {
		t.Errorf("second run: exit %d, stderr %q; want 2 naming pid %d", code, b.stderr.String(), a.cmd.Process.Pid)
	}
	if a.cmd.ProcessState != nil {
		t.Fatalf("the first run ended before the second was refused: the test proves nothing")
	}
	if code := a.wait(); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, a.stderr.String())
	}
	checkOneLineEach(t, out, n)
	for _, p := range []string{out + ".lock", out + ".state.db.lock"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the run: %v, want it removed", p, err)
		}
	}
}

// TestConcurrentRunsOnOneState starts a second run with its own output but
// the state file of a run in progress: it exits 2 at once, creating no
// output.
func TestConcurrentRunsOnOneState(t *testing.T) {
	const n = 200 // 4 s of model calls: the first run is still running when a loaded machine starts the second
	dir, job, in, backend := slowJob(t, n)
	state := filepath.Join(dir, "run.db")
	out1, out2 := filepath.Join(dir, "out1.jsonl"), filepath.Join(dir, "out2.jsonl")
	a := startChild(t, "run", job, "--inputs", in, "--out", out1, "--state", state, "--backend", backend, "--quiet")
	waitUntil(t, "the first run's first results", func() bool {
		b, _ := os.ReadFile(out1)
		return bytes.Count(b, []byte("\n")) >= 2
	})
	b := startChild(t, "run", job, "--inputs", in, "--out", out2, "--state", state, "--backend", backend, "--quiet")
	if code := b.wait(); code != 2 || !strings.Contains(b.stderr.String(), "state file "+state+" is in use by another run") ||
		!strings.Contains(b.stderr.String(), fmt.Sprintf("pid %d ", a.cmd.Process.Pid)) {
		t.Errorf("second run: exit %d, stderr %q; want 2 naming the state file and pid %d", code, b.stderr.String(), a.cmd.Process.Pid)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("the refused run created its output: %v", err)
	}
	if a.cmd.ProcessState != nil {
		t.Fatalf("the first run ended before the second was refused: the test proves nothing")
	}
	if code := a.wait(); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, a.stderr.String())
	}
	checkOneLineEach(t, out1, n)
}

// TestStaleLockDoesNotBlock leaves lock files as a killed run would: the
// next run takes the locks and runs.
func TestStaleLockDoesNotBlock(t *testing.T) {
	dir, job, in, _ := slowJob(t, 5)
	out := filepath.Join(dir, "out.jsonl")
	writeFile(t, dir, "out.jsonl.lock", "pid 1 on elsewhere since 2001-01-01T00:00:00Z: batchagent run x → y\n")
	writeFile(t, dir, "out.jsonl.state.db.lock", "")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--backend", "sim://?seed=4&tool_turns=0", "--quiet"); code != 0 {
		t.Fatalf("run beside stale lock files: exit %d\n%s", code, stderr)
	}
	checkOneLineEach(t, out, 5)
}

// TestLockFollowsSymlinks runs on an output reached through a symbolic
// link while a lock is held on the file it points to: refused.
func TestLockFollowsSymlinks(t *testing.T) {
	dir, job, in, _ := slowJob(t, 5)
	real := filepath.Join(dir, "real.jsonl")
	writeFile(t, dir, "real.jsonl", "")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	a := startChild(t, "run", job, "--inputs", in, "--out", real, "--no-state", "--backend", "sim://?latency=1s&seed=4&tool_turns=0", "--quiet")
	waitUntil(t, "the first run's lock", func() bool {
		b, _ := os.ReadFile(real + ".lock")
		return bytes.Contains(b, []byte("pid"))
	})
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", link, "--no-state", "--backend", quickBackend, "--quiet")
	if code != 2 || !strings.Contains(stderr, fmt.Sprintf("pid %d ", a.cmd.Process.Pid)) {
		t.Errorf("run through the link: exit %d, stderr %q; want 2 naming pid %d", code, stderr, a.cmd.Process.Pid)
	}
	_ = a.cmd.Process.Kill()
	a.wait()
}
