package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/cli"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// When the test binary is re-executed with this variable set, it runs the
// CLI instead of the tests, so a test can signal a real process.
const childEnv = "BATCHAGENT_CLI_CHILD"

func TestMain(m *testing.M) {
	// Each test's runs pay their calls, as its counts expect, and leave
	// the user's response cache alone; the tests of the cache name their
	// own file in their job's cache key.
	os.Setenv(jobrun.CacheEnv, "off")
	if args := os.Getenv(childEnv); args != "" {
		limitFileSize()
		ignoreEarlyInterrupts()
		os.Exit(cli.Main(context.Background(), strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func run(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

type line struct {
	Index  int            `json:"index"`
	Input  map[string]any `json:"input"`
	Output map[string]any `json:"output"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	Turns     int `json:"turns"`
	ToolCalls int `json:"tool_calls"`
}

func readLines(t *testing.T, text string) []line {
	t.Helper()
	var lines []line
	for s := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		if s == "" {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("output line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	return lines
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunExample runs the README's example job.
func TestRunExample(t *testing.T) {
	out := filepath.Join(t.TempDir(), "review.jsonl")
	code, stdout, stderr := run(t, t.Context(), "run", "../../examples/review/job.yaml", "--out", out, "--backend", "sim://?seed=1")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing (results go to --out)", stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	seen := map[int]bool{}
	for _, l := range lines {
		if l.Error != nil || l.Output["risk"] == nil || l.Turns != 2 || l.ToolCalls != 1 {
			t.Errorf("line %d = %+v, want a valid review after one read_file call", l.Index, l)
		}
		seen[l.Index] = true
	}
	if len(lines) != 6 || len(seen) != 6 {
		t.Errorf("got %d lines for %d distinct inputs, want 6 and 6", len(lines), len(seen))
	}
	for _, want := range []string{"6 results", "ok 6 · failed 0", "tool calls: requested 6, executed 6", "6 lines"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
		}
	}
}

func newJob(t *testing.T, extra string) (dir, job string) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, dir, "doc.txt", "hello world\n")
	job = writeFile(t, dir, "job.yaml", `backend: "sim://?seed=2"
task: "Read path: doc.txt for {id}"
output_schema:
  type: object
  properties:
    value: {type: integer}
  required: [value]
tools:
  - name: read_file
    roots: ["."]
`+extra)
	return dir, job
}

func TestRunBadInputLineFailsOnlyThatLine(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2\n\n{\"id\":3}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--ordered", "--quiet")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (some failed); stderr:\n%s", code, stderr)
	}
	lines := readLines(t, stdout)
	var got []string
	for _, l := range lines {
		s := "ok"
		if l.Error != nil {
			s = l.Error.Kind + ": " + l.Error.Message
		}
		got = append(got, s)
	}
	if len(got) != 3 || got[0] != "ok" || got[2] != "ok" || !strings.HasPrefix(got[1], "input: in.jsonl:2:") {
		t.Errorf("results in order = %q, want ok, an input error naming in.jsonl:2, ok", got)
	}
}

func TestRunCSVOrdered(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.csv", "id,name\n1,a\n2,\"b, with comma\"\n3,c\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--ordered", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var idx []int
	var names []any
	for _, l := range readLines(t, stdout) {
		idx = append(idx, l.Index)
		names = append(names, l.Input["name"])
	}
	if diff := cmp.Diff([]int{0, 1, 2}, idx); diff != "" {
		t.Errorf("ordered output indexes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"a", "b, with comma", "c"}, names); diff != "" {
		t.Errorf("CSV inputs (-want +got):\n%s", diff)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	bad := writeFile(t, dir, "bad.yaml", "task: hi\nlimits:\n  max_turns: many\n  max_turnz: 3\nbogus: 1\n")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no job", []string{"run"}, []string{"exactly one job file"}},
		{"bad job file", []string{"run", bad, "--inputs", in}, []string{"bad.yaml:3:14:", "bad.yaml:4:3:", `did you mean "max_turns"`, "bad.yaml:5:1:"}},
		{"missing job", []string{"run", filepath.Join(dir, "nope.yaml")}, []string{"nope.yaml"}},
		{"unknown backend", []string{"run", job, "--inputs", in, "--backend", "carrier-pigeon://x?key=sk-secret"}, []string{`unsupported scheme "carrier-pigeon"`}},
		{"bad sim parameter", []string{"run", job, "--inputs", in, "--backend", "sim://?latncy=1s"}, []string{`unknown parameter "latncy"`}},
		{"no inputs", []string{"run", job}, []string{"no inputs"}},
		{"openai without a key", []string{"run", job, "--inputs", in, "--backend", "openai://"}, []string{"no API key: set OPENAI_API_KEY"}},
		{"bad openai url", []string{"run", job, "--inputs", in, "--backend", "vllm://h:1?bogus=1"}, []string{"bogus"}},
		{"malformed url", []string{"run", job, "--inputs", in, "--backend", "%zz?key=sk-secret"}, []string{`backend: invalid URL: invalid URL escape "%zz"`}},
		{"unknown input format", []string{"run", job, "--inputs", job}, []string{"want a .jsonl or .csv"}},
		{"unknown flag", []string{"run", job, "--frobnicate"}, []string{"frobnicate"}},
		{"unknown command", []string{"frob"}, []string{`unknown command "frob"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, t.Context(), tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "sk-secret") {
				t.Errorf("stderr shows the key of the backend URL:\n%s", stderr)
			}
		})
	}
}

// TestRunInterrupt sends SIGINT to a real batchagent process mid-run: it
// must exit 130 promptly having written every result that finished, each
// one complete.
func TestRunInterrupt(t *testing.T) {
	dir, job := newJob(t, "limits:\n  max_inflight: 4\n")
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintf(&in, "{\"id\":%d}\n", i)
	}
	inPath := writeFile(t, dir, "in.jsonl", in.String())
	out := filepath.Join(dir, "out.jsonl")
	args := strings.Join([]string{"run", job, "--inputs", inPath, "--out", out, "--backend", "sim://?latency=50ms"}, "\x1f")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+args)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// 200 agents × 2 calls of 50ms on 4 slots take 5s; stop after ~1s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if bytes.Count(b, []byte("\n")) >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if took := time.Since(sent); took > 3*time.Second {
		t.Errorf("exit took %v after SIGINT, want prompt", took)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d (%v), want 130; stderr:\n%s", code, err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	if len(lines) < 10 || len(lines) >= 200 {
		t.Errorf("wrote %d lines, want the finished ones (≥ 10, < 200)", len(lines))
	}
	for _, l := range lines {
		if l.Error != nil {
			t.Errorf("line %d has error %+v; interrupted agents must not be written", l.Index, l.Error)
		}
	}
	if !strings.Contains(stderr.String(), "interrupted:") || !strings.Contains(stderr.String(), "run the same command again to resume") {
		t.Errorf("summary does not mention the interruption and how to resume:\n%s", stderr.String())
	}

	// The same command resumes: every input ends with exactly one line.
	code, _, errOut := run(t, t.Context(), strings.Split(args, "\x1f")...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, errOut)
	}
	b, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, l := range readLines(t, string(b)) {
		if seen[l.Index] || l.Error != nil {
			t.Errorf("after resuming, index %d is duplicated or failed (%+v)", l.Index, l.Error)
		}
		seen[l.Index] = true
	}
	if len(seen) != 200 {
		t.Errorf("after resuming, %d distinct inputs have a line, want 200", len(seen))
	}
}

func TestBenchUsage(t *testing.T) {
	code, _, stderr := run(t, t.Context(), "bench", "nope")
	if code != 2 || !strings.Contains(stderr, `unknown scenario "nope"`) {
		t.Errorf("bench nope: exit %d, stderr %q; want 2 and unknown scenario", code, stderr)
	}
}

// TestBenchFairSmall runs the fair scenario at a small N through the CLI and
// checks the JSON fields BENCHMARKS.md defines. Timing is not asserted.
func TestBenchFairSmall(t *testing.T) {
	code, stdout, stderr := run(t, t.Context(), "bench", "fair", "-n", "20", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var modes []string
	for s := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		for _, k := range []string{"scenario", "mode", "n", "wall_s", "ideal_s", "ratio", "agents_per_s", "ok", "failed", "tool_requested", "tool_executed", "llm_calls", "peak_rss_mb", "cpu_s"} {
			if _, ok := r[k]; !ok {
				t.Errorf("line lacks %q: %s", k, s)
			}
		}
		wantExec := 20.0
		if r["mode"] == "engine" {
			wantExec = 1
		}
		if r["ok"] != 20.0 || r["llm_calls"] != 40.0 || r["tool_executed"] != wantExec || r["ideal_s"] != 0.32 {
			t.Errorf("%v: ok %v llm_calls %v tool_executed %v ideal %v; want 20, 40, %v, 0.32", r["mode"], r["ok"], r["llm_calls"], r["tool_executed"], r["ideal_s"], wantExec)
		}
		modes = append(modes, r["mode"].(string))
	}
	if diff := cmp.Diff([]string{"engine", "naive"}, modes); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
}
