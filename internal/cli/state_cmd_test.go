package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// finishedRun runs a small job to completion with a state file and
// returns the state file's path and the run's output.
func finishedRun(t *testing.T, dir string) (state, out string) {
	t.Helper()
	_, job := newJobIn(t, dir)
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n")
	out = filepath.Join(dir, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet", "--backend", "sim://?seed=2&latency=2ms"); code != 0 {
		t.Fatalf("run: exit %d, stderr:\n%s", code, stderr)
	}
	return out + ".state.db", out
}

// newJobIn is newJob in a given directory.
func newJobIn(t *testing.T, dir string) (string, string) {
	t.Helper()
	writeFile(t, dir, "doc.txt", "hello world\n")
	return dir, writeFile(t, dir, "job.yaml", `task: "Read path: doc.txt for {id}"
output_schema:
  type: object
  properties:
    value: {type: integer}
  required: [value]
tools:
  - name: read_file
    roots: ["."]
`)
}

type timings struct {
	Queue     *float64 `json:"queue_s"`
	Inference *float64 `json:"inference_s"`
	TTFT      *float64 `json:"ttft_s"`
	Total     *float64 `json:"total_s"`
}

// TestExportTotal: exported lines carry each agent's wall time, as the
// run's own lines do, not total_s 0.
func TestExportTotal(t *testing.T) {
	state, _ := finishedRun(t, t.TempDir())
	code, stdout, stderr := run(t, t.Context(), "export", state)
	if code != 0 {
		t.Fatalf("export: exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("export wrote %d lines, want 3:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		var v struct{ Timings timings }
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		if v.Timings.Total == nil || *v.Timings.Total <= 0 {
			t.Errorf("exported line has timings.total_s %v, want the agent's wall time: %s", v.Timings.Total, l)
		}
	}
}

// TestStatusAgentSeconds: `status --agent N` prints timings in seconds
// under the keys of result lines, not nanoseconds.
func TestStatusAgentSeconds(t *testing.T) {
	state, _ := finishedRun(t, t.TempDir())
	code, stdout, stderr := run(t, t.Context(), "status", state, "--agent", "1")
	if code != 0 {
		t.Fatalf("status --agent: exit %d, stderr:\n%s", code, stderr)
	}
	var v struct {
		Timings map[string]float64 `json:"timings"`
		Started time.Time          `json:"started"`
		Spans   []struct {
			Turn      int       `json:"turn"`
			Start     time.Time `json:"start"`
			Inference float64   `json:"inference_s"`
		} `json:"spans"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("status --agent output: %v\n%s", err, stdout)
	}
	// One span a turn, in seconds too, adding up to the timings.
	var inference float64
	for i, sp := range v.Spans {
		if sp.Turn != i || sp.Start.Before(v.Started) || !(sp.Inference > 0 && sp.Inference < 60) {
			t.Errorf("span %d = %+v, want turn %d, starting after the agent (%v), inference_s in seconds", i, sp, i, v.Started)
		}
		inference += sp.Inference
	}
	if len(v.Spans) == 0 || v.Started.IsZero() || math.Abs(inference-v.Timings["inference_s"]) > 1e-5*float64(len(v.Spans)) {
		t.Errorf("started %v, %d spans of inference %vs; want a start and spans adding up to inference_s %v",
			v.Started, len(v.Spans), inference, v.Timings["inference_s"])
	}
	for _, k := range []string{"queue_s", "inference_s", "tools_s", "ttft_s", "total_s"} {
		if _, ok := v.Timings[k]; !ok {
			t.Errorf("timings lack %s: %v", k, v.Timings)
		}
	}
	// The sim answers in about 2 ms a turn: seconds, not nanoseconds.
	if inf := v.Timings["inference_s"]; !(inf > 0 && inf < 60) {
		t.Errorf("timings.inference_s = %v, want seconds", inf)
	}
	if tot := v.Timings["total_s"]; !(tot >= v.Timings["inference_s"] && tot < 60) {
		t.Errorf("timings.total_s = %v, want the agent's wall time in seconds", tot)
	}
}

// TestStatusJSON: `status --json` prints the summary as one JSON object.
func TestStatusJSON(t *testing.T) {
	state, _ := finishedRun(t, t.TempDir())
	code, stdout, stderr := run(t, t.Context(), "status", state, "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Count(strings.TrimSpace(stdout), "\n") != 0 {
		t.Errorf("status --json printed several lines:\n%s", stdout)
	}
	type job struct {
		Job          string         `json:"job"`
		Inputs       *int           `json:"inputs"`
		Pending      *int           `json:"pending"`
		Done         int            `json:"done"`
		Failed       int            `json:"failed"`
		Running      int            `json:"running"`
		FailedByKind map[string]int `json:"failed_by_kind"`
		ModelCalls   int            `json:"model_calls"`
		Turns        int            `json:"turns"`
	}
	var got struct {
		State   string `json:"state"`
		Inputs  *int   `json:"inputs"`
		Pending *int   `json:"pending"`
		Done    int    `json:"done"`
		Failed  int    `json:"failed"`
		Running int    `json:"running"`
		Jobs    []job  `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	three, zero := 3, 0
	want := job{Job: "job", Inputs: &three, Pending: &zero, Done: 3, FailedByKind: map[string]int{}, ModelCalls: 6, Turns: 6}
	if got.State != state || got.Done != 3 || got.Failed != 0 || got.Running != 0 || got.Inputs == nil || *got.Inputs != 3 || got.Pending == nil || *got.Pending != 0 {
		t.Errorf("status --json totals = %s, want state %s, 3 inputs, 0 pending, 3 done", stdout, state)
	}
	if len(got.Jobs) != 1 {
		t.Fatalf("status --json jobs = %d, want 1", len(got.Jobs))
	}
	if diff := cmp.Diff(want, got.Jobs[0]); diff != "" {
		t.Errorf("status --json job (-want +got):\n%s", diff)
	}
}

// TestStateCommandsReadOnly: status and export read a state file they
// cannot write (file 0444 in a directory 0555), in WAL mode with no -shm
// beside it, and leave it as it was. As root, permissions do not bind:
// the commands then run as user nobody in a child process.
func TestStateCommandsReadOnly(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	state, out := finishedRun(t, dir)
	for _, p := range []string{state + "-wal", state + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s left by the run, want a cleanly closed state file", p)
		}
	}
	before, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	exe := os.Args[0]
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// nobody must reach the test binary and the state file.
		exe = filepath.Join(base, "cli.test")
		copyFile(t, os.Args[0], exe, 0o755)
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	for _, p := range []string{state, out} {
		if err := os.Chmod(p, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })

	child := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), so.String(), se.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, so.String(), se.String()
	}
	code, stdout, stderr := child("status", state)
	if code != 0 || !strings.Contains(stdout, "3 inputs · pending 0 · done 3 · failed 0") {
		t.Errorf("status on a read-only state file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = child("export", state)
	if code != 0 || strings.Count(stdout, "\n") != 3 {
		t.Errorf("export on a read-only state file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := child("status", state, "--json"); code != 0 {
		t.Errorf("status --json on a read-only state file: exit %d, stderr %q", code, stderr)
	}
	after, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("the state file changed")
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStatusFlags: --job picks the job to summarize; a negative --agent,
// an unknown --job, and --json with --agent are usage errors.
func TestStatusFlags(t *testing.T) {
	state, _ := finishedRun(t, t.TempDir())
	if code, stdout, stderr := run(t, t.Context(), "status", state, "--job", "job"); code != 0 || !strings.HasPrefix(stdout, "job job: 3 inputs") {
		t.Errorf("status --job job: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"status", state, "--agent", "-2"},
		{"status", state, "--job", "nope"},
		{"status", state, "--json", "--agent", "1"},
	} {
		if code, _, stderr := run(t, t.Context(), args...); code != 2 {
			t.Errorf("Main(%q) = %d, want 2; stderr %q", args, code, stderr)
		}
	}
}

// TestStatusJSONNoSavedState: a run that began but saved no state (its
// backend never answered) has a first time and no last one; `status
// --json` leaves "last" out rather than printing year 1.
func TestStatusJSONNoSavedState(t *testing.T) {
	dir, job, in := outageJob(t, 3, "200ms")
	out := filepath.Join(dir, "out.jsonl")
	backend := fmt.Sprintf("openai+http://127.0.0.1:%d/v1", freePort(t)) // nothing listens there
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet", "--backend", backend); code != 1 {
		t.Fatalf("run against a dead backend: exit %d, want 1; stderr:\n%s", code, stderr)
	}
	code, stdout, stderr := run(t, t.Context(), "status", out+".state.db", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d, stderr:\n%s", code, stderr)
	}
	var got struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Jobs) != 1 {
		t.Fatalf("status --json = %s (%v), want one job", stdout, err)
	}
	j := got.Jobs[0]
	if _, ok := j["first"]; !ok {
		t.Errorf("status --json job = %v, want a first time (the run began)", j)
	}
	if last, ok := j["last"]; ok {
		t.Errorf("status --json job last = %v, want none: no state was saved", last)
	}
}
