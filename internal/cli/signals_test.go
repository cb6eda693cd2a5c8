package cli_test

import (
	"bufio"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ignoreEnv, set for a child process, makes it ignore SIGINT until the run
// handles signals (signal.Notify undoes signal.Ignore), so that a test can
// send SIGINT until the run reports it without killing the process before.
const ignoreEnv = "BATCHAGENT_CLI_IGNORE_EARLY_SIGINT"

// ignoreEarlyInterrupts applies ignoreEnv to this process.
func ignoreEarlyInterrupts() {
	if os.Getenv(ignoreEnv) != "" {
		signal.Ignore(os.Interrupt)
	}
}

// TestRunSecondInterrupt sends SIGINT twice to a real batchagent process
// whose model calls take 20s: the first starts a graceful shutdown, which
// would wait for the calls in flight; the second ends the grace, and the
// process exits at once with status 130, having written no result.
func TestRunSecondInterrupt(t *testing.T) {
	dir, job := newJob(t, "limits:\n  max_inflight: 4\n")
	inPath := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	out := filepath.Join(dir, "out.jsonl")
	args := strings.Join([]string{"run", job, "--inputs", inPath, "--out", out, "--backend", "sim://?latency=20s"}, "\x1f")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+args, ignoreEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64) // the child's stderr; closed at its end
	go func() {                    // ends with the child's stderr
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// waitFor reads the child's stderr until a line holds what, sending
	// SIGINT every 50ms meanwhile when repeat is set.
	waitFor := func(what string, repeat bool) string {
		t.Helper()
		timeout := time.NewTimer(10 * time.Second)
		defer timeout.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var seen strings.Builder
		for {
			select {
			case <-tick.C:
				if repeat {
					if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
						t.Fatal(err)
					}
				}
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child's stderr ended without %q:\n%s", what, seen.String())
				}
				seen.WriteString(l + "\n")
				if strings.Contains(l, what) {
					return seen.String()
				}
			case <-timeout.C:
				t.Fatalf("no %q from the child after 10s:\n%s", what, seen.String())
			}
		}
	}
	// The child ignores SIGINT by the time it creates the state file; until
	// the run handles signals, SIGINT is ignored; once it does, the first
	// starts the graceful shutdown, while the model calls take 20s.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(out + ".state.db"); err == nil {
			break
		}
	}
	waitFor("stopping: finishing the turns in flight", true)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("stopping at once", false)
	var rest strings.Builder
	for l := range lines {
		rest.WriteString(l + "\n")
	}
	err = cmd.Wait()
	if took := time.Since(sent); took > 5*time.Second {
		t.Errorf("exit took %v after the second SIGINT, want prompt (the calls in flight take 20s)", took)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d (%v), want 130; stderr:\n%s", code, err, rest.String())
	}
	if b, err := os.ReadFile(out); err != nil || len(b) != 0 {
		t.Errorf("output %q (%v), want empty: no agent finished", b, err)
	}
	if !strings.Contains(rest.String(), "run the same command again to resume") {
		t.Errorf("summary does not say how to resume:\n%s", rest.String())
	}
}
