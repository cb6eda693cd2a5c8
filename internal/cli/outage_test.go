package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// simProc is `batchagent sim serve` running as a child process.
type simProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// startSimProcess runs `batchagent sim serve --addr 127.0.0.1:PORT ARGS` as
// a child process (the test binary re-executed as the CLI) and returns once
// it listens. The process is killed when the test ends.
func startSimProcess(t *testing.T, port int, args ...string) *simProc {
	t.Helper()
	argv := append([]string{"sim", "serve", "--addr", "127.0.0.1:" + strconv.Itoa(port),
		"--prefill-per-token", "1us", "--decode-step", "2ms", "--decode-step-per-seq", "10us", "--max-seqs", "64", "--tool-turns", "0"}, args...)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(argv, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &simProc{cmd: cmd, done: make(chan struct{})}
	r := bufio.NewReader(stderr)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("sim serve on port %d: first line %q, %v", port, line, err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, r) // the pipe closes when the process exits
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill(t) })
	return p
}

// kill stops the process with SIGKILL and waits for it to be gone.
func (p *simProc) kill(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("kill sim serve: %v", err)
	}
	<-p.done
}

// outageJob writes a job of n single-turn agents whose outage budget is
// budget, and its inputs.
func outageJob(t *testing.T, n int, budget string) (dir, job, in string) {
	t.Helper()
	dir = t.TempDir()
	job = writeFile(t, dir, "job.yaml", "task: \"Say hello to {id}.\"\nlimits:\n  outage_budget: "+budget+"\n")
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":\"item %d\"}\n", i)
	}
	in = writeFile(t, dir, "in.jsonl", b.String())
	return dir, job, in
}

// checkAllOK checks that out holds one successful line per input.
func checkAllOK(t *testing.T, out string, n int) {
	t.Helper()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	lines, failed := 0, 0
	for s := range strings.Lines(string(b)) {
		var l struct {
			Index int `json:"index"`
			Error *struct {
				Kind    string `json:"kind"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("output line %q: %v", s, err)
		}
		lines++
		seen[l.Index] = true
		if l.Error != nil {
			if failed < 3 {
				t.Errorf("line %d failed: %s: %s", l.Index, l.Error.Kind, l.Error.Message)
			}
			failed++
		}
	}
	if lines != n || len(seen) != n || failed != 0 {
		t.Errorf("%d lines for %d distinct inputs, %d failed; want %d ok", lines, len(seen), failed, n)
	}
}

// TestRunRidesOutRateLimitStorm: a sim server answers every request 429
// with "Retry-After: 1" for 5s, from 300ms after it starts, during a
// 200-agent run. Every agent succeeds; the run waits the storm out.
func TestRunRidesOutRateLimitStorm(t *testing.T) {
	port := freePort(t)
	start := time.Now()
	startSimProcess(t, port, "--decode-step", "5ms", "--fault", "rate_limited", "--fault-after", "100ms", "--fault-for", "5s", "--retry-after", "1s")
	dir, job, in := outageJob(t, 200, "1m")
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out,
		"--backend", fmt.Sprintf("openai+http://127.0.0.1:%d/v1", port), "--quiet")
	t.Logf("run ended %v after the server started", time.Since(start))
	if time.Since(start) < 5100*time.Millisecond && code == 0 {
		t.Fatal("the run ended before the storm did: the test proves nothing")
	}
	if code != 0 {
		t.Errorf("exit %d, want 0\n%s", code, stderr)
	}
	checkAllOK(t, out, 200)
}

// TestRunRidesOutServerRestart kills the sim server (SIGKILL) during a
// 200-agent run and starts a new one on the same port 2s later. Every
// agent succeeds: connection failures are retried until the server is
// back.
func TestRunRidesOutServerRestart(t *testing.T) {
	port := freePort(t)
	first := startSimProcess(t, port, "--decode-step", "5ms")
	dir, job, in := outageJob(t, 200, "1m")
	out := filepath.Join(dir, "out.jsonl")
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1) // the run's exit
	go func() {
		code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out,
			"--backend", fmt.Sprintf("openai+http://127.0.0.1:%d/v1", port), "--quiet")
		done <- result{code, stderr}
	}()
	// Kill the server once the run has made some progress, not all.
	deadline := time.Now().Add(10 * time.Second)
	var before int // lines written when the server is killed
	for {
		b, _ := os.ReadFile(out)
		if before = strings.Count(string(b), "\n"); before >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	first.kill(t)
	t.Logf("%d lines written when the server was killed", before)
	if before >= 200 {
		t.Fatal("the run finished before the server was killed: the test proves nothing")
	}
	killed := time.Now()
	time.Sleep(2 * time.Second) // the outage: not a timing assertion
	startSimProcess(t, port, "--decode-step", "5ms")
	r := <-done
	t.Logf("run ended %v after the kill", time.Since(killed))
	if r.code != 0 {
		t.Errorf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	checkAllOK(t, out, 200)
}

// TestRunDeadBackendLeavesInputsPending runs against a port where nothing
// listens: the run stops with a clear error and exit status 1, writes no
// result line, and the state file shows every input pending, so the same
// command resumes once the backend is up.
func TestRunDeadBackendLeavesInputsPending(t *testing.T) {
	port := freePort(t) // nothing listens there
	dir, job, in := outageJob(t, 50, "1s")
	out := filepath.Join(dir, "out.jsonl")
	backend := fmt.Sprintf("openai+http://127.0.0.1:%d/v1", port)
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--backend", backend)
	want := fmt.Sprintf("batchagent run: backend unreachable: openai+http://127.0.0.1:%d: ", port)
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "(50 inputs left pending; run again to resume)") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q … (50 inputs left pending; run again to resume)", code, stderr, want)
	}
	if b, err := os.ReadFile(out); err != nil || len(b) != 0 {
		t.Errorf("output holds %d lines (%v), want none: no input failed; first: %.300s", strings.Count(string(b), "\n"), err, b)
	}
	code, stdout, errOut := run(t, t.Context(), "status", out+".state.db")
	if code != 0 || !strings.Contains(stdout, "50 inputs · pending 50 · done 0 · failed 0 · running 0") {
		t.Errorf("status: exit %d\n%s%s\nwant 50 inputs, all pending", code, stdout, errOut)
	}
	// The backend comes up: the same command runs every input.
	startSimProcess(t, port)
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out,
		"--backend", fmt.Sprintf("openai+http://127.0.0.1:%d/v1", port), "--quiet"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	checkAllOK(t, out, 50)
}

// TestRunWrongBackendURLFailsFast runs with the default limits against a
// loopback port where nothing listens, as a mistyped --backend would: no
// call of the run was ever answered and every connection is refused, so
// the run stops within about a second (not the 10 s start window of a
// backend that answered before), names the refused connection, leaves the
// inputs pending, and its summary counts no model call as made.
func TestRunWrongBackendURLFailsFast(t *testing.T) {
	port := freePort(t) // nothing listens there
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "task: \"Say hello to {id}.\"\n")
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "{\"id\":\"item %d\"}\n", i)
	}
	in := writeFile(t, dir, "in.jsonl", b.String())
	out := filepath.Join(dir, "out.jsonl")
	begin := time.Now()
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out,
		"--backend", fmt.Sprintf("openai+http://127.0.0.1:%d/v1", port))
	took := time.Since(begin)
	t.Logf("wrong backend URL: exit %d after %v", code, took)
	if code != 1 || !strings.Contains(stderr, "backend unreachable") || !strings.Contains(stderr, "connection refused") ||
		!strings.Contains(stderr, "(20 inputs left pending; run again to resume)") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1, backend unreachable naming the refused connection, 20 inputs pending", code, stderr)
	}
	if took > 3*time.Second {
		t.Errorf("run took %v, want it stopped within about a second of the first refused connection", took)
	}
	if !strings.Contains(stderr, "model calls: 0 (") || !strings.Contains(stderr, "none answered by the server") {
		t.Errorf("summary:\n%s\nwant model calls 0, the attempts counted apart as not answered", stderr)
	}
}
