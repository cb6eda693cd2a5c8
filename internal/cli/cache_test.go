package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// cacheLine is what the cache tests read of a result line.
type cacheLine struct {
	Index       int             `json:"index"`
	Error       json.RawMessage `json:"error"`
	ModelCalls  int             `json:"model_calls"`
	CachedCalls int             `json:"cached_calls"`
	SavedTokens int64           `json:"saved_tokens"`
}

func readCacheLines(t *testing.T, path string) map[int]cacheLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(map[int]cacheLine)
	for s := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var l cacheLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("output line %q: %v", s, err)
		}
		if l.Error != nil {
			t.Errorf("line %d failed: %s", l.Index, l.Error)
		}
		lines[l.Index] = l
	}
	return lines
}

// cacheJob writes a job of n agents that each read one file with
// read_file (two model calls: the tool call and the answer) against the
// HTTP simulator at addr, its answers cached in the job's directory.
func cacheJob(t *testing.T, addr string, n int) (dir, job string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 240 {
		writeFile(t, filepath.Join(dir, "files"), fmt.Sprintf("f%d.txt", i), fmt.Sprintf("version 1 of file %d\n", i))
	}
	writeCacheInputs(t, dir, n)
	job = writeFile(t, dir, "job.yaml", `backend: openai+http://`+addr+`/v1
task: "Read the file path: {path}"
inputs: in.jsonl
output_schema:
  type: object
  properties: {ok: {type: boolean}}
  required: [ok]
pricing: {input: 1, output: 4}
tools:
  - name: read_file
    roots: [files]
limits: {max_inflight: 16}
cache: {path: answers.db}
`)
	return dir, job
}

func writeCacheInputs(t *testing.T, dir string, n int) {
	t.Helper()
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"path\":\"f%d.txt\"}\n", i)
	}
	writeFile(t, dir, "in.jsonl", in.String())
}

func startCacheSim(t *testing.T) (string, *simhttp.Server) {
	t.Helper()
	return startSimServer(t, simhttp.Config{Model: sim.Config{Seed: 7, ToolTurns: 1}, MaxSeqs: 64,
		PrefillPerToken: time.Nanosecond, DecodeStep: time.Microsecond})
}

// TestCacheAcrossRuns runs a 200-input job, then again with --restart
// after 20 inputs were appended: the backend gets only the new agents'
// calls, and the other results say theirs were cached. Then one agent's
// file changes: only its call after the tool's result is paid again.
func TestCacheAcrossRuns(t *testing.T) {
	addr, srv := startCacheSim(t)
	dir, job := cacheJob(t, addr, 200)
	out := filepath.Join(dir, "out.jsonl")
	runOK := func(args ...string) string {
		t.Helper()
		code, _, stderr := run(t, t.Context(), append([]string{"run", job, "--out", out}, args...)...)
		if code != 0 {
			t.Fatalf("run %v: exit %d, stderr:\n%s", args, code, stderr)
		}
		return stderr
	}

	runOK()
	if got := srv.Stats().Requests; got != 400 {
		t.Fatalf("first run: backend got %d requests, want 400 (200 agents × 2 calls)", got)
	}

	writeCacheInputs(t, dir, 220)
	stderr := runOK("--restart")
	if got := srv.Stats().Requests - 400; got != 40 {
		t.Errorf("second run: backend got %d requests, want 40 (the 20 new agents' only)", got)
	}
	lines := readCacheLines(t, out)
	if len(lines) != 220 {
		t.Fatalf("%d result lines, want 220", len(lines))
	}
	for i, l := range lines {
		want := 2
		if i >= 200 {
			want = 0
		}
		if l.CachedCalls != want || (want > 0) != (l.SavedTokens > 0) {
			t.Errorf("line %d: cached_calls %d, saved_tokens %d; want %d cached calls", i, l.CachedCalls, l.SavedTokens, want)
		}
	}
	if !strings.Contains(stderr, "400 calls answered from the cache") || !strings.Contains(stderr, " saved") || !strings.Contains(stderr, "$") {
		t.Errorf("summary lacks the cache line with tokens and dollars saved:\n%s", stderr)
	}

	// The file agent 5 reads changes: its first call (the tool call) is
	// still cached, the answer after the new file's text is paid.
	writeFile(t, filepath.Join(dir, "files"), "f5.txt", "version 2 of file 5\n")
	before := srv.Stats().Requests
	runOK("--restart")
	if got := srv.Stats().Requests - before; got != 1 {
		t.Errorf("after a tool's result changed: backend got %d requests, want 1", got)
	}
	if l := readCacheLines(t, out)[5]; l.CachedCalls != 1 || l.ModelCalls != 2 {
		t.Errorf("line 5: cached_calls %d of %d model calls, want 1 of 2", l.CachedCalls, l.ModelCalls)
	}

}

// TestNoCache: --no-cache pays every call, the cache full of their
// answers though.
func TestNoCache(t *testing.T) {
	addr, srv := startCacheSim(t)
	dir, job := cacheJob(t, addr, 20)
	out := filepath.Join(dir, "out.jsonl")
	for _, args := range [][]string{nil, {"--restart", "--no-cache"}} {
		code, _, stderr := run(t, t.Context(), append([]string{"run", job, "--out", out}, args...)...)
		if code != 0 {
			t.Fatalf("run %v: exit %d, stderr:\n%s", args, code, stderr)
		}
		if args != nil && strings.Contains(stderr, "answered from the cache") {
			t.Errorf("--no-cache summary shows a cache line:\n%s", stderr)
		}
	}
	if got := srv.Stats().Requests; got != 80 {
		t.Errorf("backend got %d requests, want 80 (20 agents × 2 calls, twice)", got)
	}
	for i, l := range readCacheLines(t, out) {
		if l.CachedCalls != 0 {
			t.Errorf("--no-cache: line %d has %d cached calls", i, l.CachedCalls)
		}
	}
}

// TestCacheSharedByTwoProcesses runs the same job in two processes at
// once, on one cache file: both complete, every line is a result.
func TestCacheSharedByTwoProcesses(t *testing.T) {
	addr, _ := startCacheSim(t)
	dir, job := cacheJob(t, addr, 100)
	var cmds []*exec.Cmd
	var errs []*bytes.Buffer
	for i := range 2 {
		args := strings.Join([]string{"run", job, "--out", filepath.Join(dir, fmt.Sprintf("out%d.jsonl", i))}, "\x1f")
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+args)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, errs = append(cmds, cmd), append(errs, &stderr)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v, stderr:\n%s", i, err, errs[i])
		}
		if n := len(readCacheLines(t, filepath.Join(dir, fmt.Sprintf("out%d.jsonl", i)))); n != 100 {
			t.Errorf("process %d wrote %d results, want 100", i, n)
		}
		if strings.Contains(errs[i].String(), "cache reads or writes failed") {
			t.Errorf("process %d met cache errors:\n%s", i, errs[i])
		}
	}
}

// TestCacheCorruptFile: a cache file that is not one stops the run at
// start with an error naming it, and --no-cache runs without it.
func TestCacheCorruptFile(t *testing.T) {
	addr, _ := startCacheSim(t)
	dir, job := cacheJob(t, addr, 3)
	writeFile(t, dir, "answers.db", strings.Repeat("garbage ", 1000))
	code, _, stderr := run(t, t.Context(), "run", job, "--out", filepath.Join(dir, "out.jsonl"))
	if code != 2 || !strings.Contains(stderr, filepath.Join(dir, "answers.db")) || !strings.Contains(stderr, "--no-cache") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and an error naming the cache file and --no-cache", code, stderr)
	}
	if code, _, stderr := run(t, t.Context(), "run", job, "--out", filepath.Join(dir, "out2.jsonl"), "--no-cache"); code != 0 {
		t.Errorf("--no-cache: exit %d, stderr:\n%s", code, stderr)
	}
}
