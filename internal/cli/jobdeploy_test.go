package cli_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/redistest"
)

// deployedJob writes a job whose backend is two deployments, live (the
// model server at addr) and dead (a port nothing listens on), and n
// inputs, into dir.
func deployedJob(t *testing.T, dir, addr string, n int) (job, in string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	job = writeFile(t, dir, "job.yaml", fmt.Sprintf(`task: "Label item {id}"
pricing: {input: 2.5, output: 10}
backend:
  deployments:
    - {name: live, url: "sim+http://%s", max_inflight: 8}
    - {name: dead, url: "sim+http://%s", max_inflight: 8}
  cooldown: 10s
`, addr, dead))
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	return job, writeFile(t, dir, "in.jsonl", b.String())
}

// deployedLines returns the lines of the file at path, and how many of them
// hold an error.
func deployedLines(t *testing.T, path string) (lines, failed int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data)) {
		lines++
		if strings.Contains(l, `"error"`) {
			failed++
		}
	}
	return lines, failed
}

// TestDryRunDeployments: a dry run accepts a job over deployments, shows
// them in a line and calls none.
func TestDryRunDeployments(t *testing.T) {
	srv, addr := startModelServer(t, 0)
	dir := t.TempDir()
	job, in := deployedJob(t, dir, addr, 10)
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if want := "backend: 2 deployments: live (max_inflight 8), dead (max_inflight 8)\n"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
	if got := srv.Stats().Requests; got != 0 {
		t.Errorf("the live deployment got %d requests, want 0", got)
	}
}

// TestRunDeploymentDown: a run over two deployments, one down from the
// start, answers every input; its log names the dead one and its
// failures.
func TestRunDeploymentDown(t *testing.T) {
	srv, addr := startModelServer(t, 0)
	dir := t.TempDir()
	job, in := deployedJob(t, dir, addr, 30)
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if lines, failed := deployedLines(t, out); lines != 30 || failed != 0 {
		t.Errorf("%d lines, %d failed; want 30, none failed", lines, failed)
	}
	if got := srv.Stats().Requests; got < 30 {
		t.Errorf("the live deployment got %d requests, want every input's (30)", got)
	}
	if !regexp.MustCompile(`(?m)deployments: live \d+ calls · dead [1-9]\d* calls, [1-9]\d* failed \(breaker (open|half-open)\)$`).MatchString(stderr) {
		t.Errorf("the summary does not name the dead deployment, its failures and its breaker:\n%s", stderr)
	}
	if want := "concurrency: fixed 16 (max 16: the deployments' max_inflight, summed)"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// TestRunDeploymentsOverRedis: each worker of a run over Redis opens the
// job file's deployments: one down from the start, every input is
// answered by the live one.
func TestRunDeploymentsOverRedis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	srv, addr := startModelServer(t, 0)
	dir := t.TempDir()
	job, in := deployedJob(t, dir, addr, 20)
	for _, id := range []string{"w1", "w2"} {
		startProc(t, dir, id, "worker", "--redis", rs.URL, "--id", id, "--max-active", "8")
	}
	coord := startProc(t, dir, "coordinator", "run", job, "--inputs", in, "--out", "out.jsonl", "--redis", rs.URL, "--quiet")
	if code := coord.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, coord.stderr.String())
	}
	if lines, failed := deployedLines(t, filepath.Join(dir, "out.jsonl")); lines != 20 || failed != 0 {
		t.Errorf("%d lines, %d failed; want 20, none failed", lines, failed)
	}
	if got := srv.Stats().Requests; got < 20 {
		t.Errorf("the live deployment got %d requests, want every input's (20)", got)
	}
}
