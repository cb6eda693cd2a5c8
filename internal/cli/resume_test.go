package cli_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/google/go-cmp/cmp"
)

const resumeInputs = 300

// resumeJob writes a multi-turn job (two tool turns, then the answer) with
// at most 16 agents alive: each has at most one turn not yet checkpointed,
// so at most 16 turns are in flight at any moment.
func resumeJob(t *testing.T, dir string) (job, in string) {
	t.Helper()
	writeFile(t, dir, "doc.txt", "shared document\n")
	job = writeFile(t, dir, "job.yaml", `task: "Read path: doc.txt for item {id}"
output_schema:
  type: object
  properties: {value: {type: integer}, word: {type: string}}
  required: [value, word]
tools:
  - name: read_file
    roots: ["."]
limits:
  max_active: 16
`)
	var b strings.Builder
	for i := range resumeInputs {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	return job, writeFile(t, dir, "in.jsonl", b.String())
}

// outputsByIndex reads a results file: each index's output, and the count
// of lines.
func outputsByIndex(t *testing.T, path string) (map[int]string, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	n := 0
	for line := range bytes.SplitSeq(bytes.TrimSpace(b), []byte("\n")) {
		var v struct {
			Index  int             `json:"index"`
			Output json.RawMessage `json:"output"`
			Error  any             `json:"error"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: line %q: %v", path, line, err)
		}
		if v.Error != nil {
			t.Errorf("%s: index %d failed: %v", path, v.Index, v.Error)
		}
		if _, dup := got[v.Index]; dup {
			t.Errorf("%s: index %d written twice", path, v.Index)
		}
		got[v.Index] = string(v.Output)
		n++
	}
	return got, n
}

// TestResumeAfterSIGKILL kills a real batchagent process at random moments
// of a run of multi-turn agents, resumes it each time with the same
// command, and checks the end result against an uninterrupted run: one
// line per input, the same outputs by index, and no more model calls than
// the uninterrupted run plus the turns in flight at each kill.
func TestResumeAfterSIGKILL(t *testing.T) {
	addr, srv := startSimServer(t, simhttp.Config{Model: sim.Config{Seed: 11, ToolTurns: 2}, MaxSeqs: 64,
		PrefillPerToken: time.Microsecond, DecodeStep: 2 * time.Millisecond, DecodeStepPerSeq: 10 * time.Microsecond})
	backend := "sim+http://" + addr

	// The uninterrupted run.
	dirA := t.TempDir()
	jobA, inA := resumeJob(t, dirA)
	outA := filepath.Join(dirA, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", jobA, "--inputs", inA, "--out", outA, "--backend", backend, "--quiet"); code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, stderr)
	}
	callsA := srv.Stats().Requests
	want, n := outputsByIndex(t, outA)
	if n != resumeInputs || callsA != 3*resumeInputs {
		t.Fatalf("uninterrupted run: %d lines, %d model calls; want %d and %d", n, callsA, resumeInputs, 3*resumeInputs)
	}

	// The interrupted one: killed three times, then left to finish.
	dirB := t.TempDir()
	jobB, inB := resumeJob(t, dirB)
	outB := filepath.Join(dirB, "out.jsonl")
	args := strings.Join([]string{"run", jobB, "--inputs", inB, "--out", outB, "--backend", backend, "--quiet"}, "\x1f")
	rng := rand.New(rand.NewPCG(7, 7))
	const kills = 3
	var size int64
	for k := range kills {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+args)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for this attempt to make progress, then kill at a random
		// moment.
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _ := os.Stat(outB)
			if (st != nil && st.Size() > size) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if st, err := os.Stat(outB); err == nil {
			size = st.Size()
		}
		_, lines := outputsByIndex(t, outB)
		t.Logf("kill %d: %d result lines on disk, %d model calls so far", k+1, lines, srv.Stats().Requests-callsA)
		// status of the killed run: every input is pending, done, failed
		// or running, and at least the lines on disk are done.
		code, stdout, errOut := run(t, t.Context(), "status", outB+".state.db")
		var inputs, pending, done, failed, running int
		if _, err := fmt.Sscanf(stdout, "job job: %d inputs · pending %d · done %d · failed %d · running %d",
			&inputs, &pending, &done, &failed, &running); err != nil || code != 0 {
			t.Fatalf("status after kill %d: exit %d, %v\n%s%s", k+1, code, err, stdout, errOut)
		}
		if inputs != resumeInputs || pending+done+failed+running != inputs || done < lines {
			t.Errorf("status after kill %d: %d inputs, pending %d, done %d, failed %d, running %d; want %d in all, done ≥ %d lines",
				k+1, inputs, pending, done, failed, running, resumeInputs, lines)
		}
	}
	if code, _, stderr := run(t, t.Context(), "run", jobB, "--inputs", inB, "--out", outB, "--backend", backend); code != 0 {
		t.Fatalf("final resume: exit %d\n%s", code, stderr)
	}
	got, n := outputsByIndex(t, outB)
	if n != resumeInputs {
		t.Errorf("%d lines after resuming, want exactly %d", n, resumeInputs)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outputs by index differ from the uninterrupted run (-want +got):\n%s", diff)
	}
	callsB := srv.Stats().Requests - callsA
	t.Logf("model calls: uninterrupted %d, killed %d times and resumed %d", callsA, kills, callsB)
	if limit := callsA + kills*16; callsB > limit {
		t.Errorf("model calls across attempts = %d, want ≤ %d (uninterrupted %d + 16 in flight × %d kills)", callsB, limit, callsA, kills)
	}
}

// TestResumeRefusesChangedJob edits the task template between runs: the
// resume is refused naming what changed, and --force proceeds.
func TestResumeRefusesChangedJob(t *testing.T) {
	dir := t.TempDir()
	job, in := resumeJob(t, dir)
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out, "--quiet"}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	// The same command again restores every result and runs nothing; the
	// summary says so and counts no work.
	code, _, stderr := run(t, t.Context(), args[:len(args)-1]...)
	restored := fmt.Sprintf("%d results in ", resumeInputs)
	if code != 0 || !strings.Contains(stderr, restored) ||
		!strings.Contains(stderr, fmt.Sprintf("(%d restored from the state file; 0 run, 0.0 agents/s)", resumeInputs)) ||
		!strings.Contains(stderr, "model calls: 0 · turns 0\n") || !strings.Contains(stderr, "tool calls: requested 0, executed 0") {
		t.Errorf("rerun of a finished job: exit %d, summary:\n%s\nwant %d restored, 0 run, no model calls", code, stderr, resumeInputs)
	}
	b, _ := os.ReadFile(job)
	if err := os.WriteFile(job, bytes.Replace(b, []byte("for item {id}"), []byte("for entry {id}"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, t.Context(), args...)
	if code != 2 || !strings.Contains(stderr, "changed since its last run: task") || !strings.Contains(stderr, "--force") {
		t.Errorf("resume with an edited task: exit %d, stderr %q; want 2 naming the task and --force", code, stderr)
	}
	if code, _, stderr := run(t, t.Context(), append(args, "--force")...); code != 0 {
		t.Errorf("resume with --force: exit %d\n%s", code, stderr)
	}
	if _, n := outputsByIndex(t, out); n != resumeInputs {
		t.Errorf("%d lines after the forced resume, want %d", n, resumeInputs)
	}
}

func TestStatusAndExport(t *testing.T) {
	dir := t.TempDir()
	job, in := resumeJob(t, dir)
	out := filepath.Join(dir, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	// The run record holds digests, not the backend URL (its query may
	// hold a key).
	db, err := sql.Open("sqlite", out+".state.db")
	if err != nil {
		t.Fatal(err)
	}
	var fp map[string]string
	var raw []byte
	if err := db.QueryRow(`SELECT fingerprint FROM runs`).Scan(&raw); err != nil || json.Unmarshal(raw, &fp) != nil {
		t.Fatalf("fingerprint: %v (%s)", err, raw)
	}
	db.Close()
	if b := fp["backend"]; len(b) != 24 || strings.Contains(string(raw), "sim") {
		t.Errorf("stored fingerprint %s: want the backend as a 24-digit digest, no URL", raw)
	}
	code, stdout, stderr := run(t, t.Context(), "status", out+".state.db")
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("%d inputs · pending 0 · done %d · failed 0 · running 0", resumeInputs, resumeInputs)) {
		t.Errorf("status: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// One agent's state, conversation included: the task, the tool call,
	// its result, the answer.
	code, stdout, stderr = run(t, t.Context(), "status", out+".state.db", "--agent", "7")
	var st agent.State
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Index != 7 || st.Status != agent.StatusDone ||
		len(st.Messages) < 4 || !strings.Contains(st.Messages[0].Content, "for item 7") {
		t.Errorf("status --agent 7: exit %d, %v, index %d, status %s, %d messages\n%s%s", code, err, st.Index, st.Status, len(st.Messages), stdout, stderr)
	}
	if code, _, stderr := run(t, t.Context(), "status", out+".state.db", "--agent", "100000"); code != 2 || !strings.Contains(stderr, "no state stored") {
		t.Errorf("status --agent 100000: exit %d, stderr %q; want 2 and no state stored", code, stderr)
	}
	exported := filepath.Join(dir, "export.jsonl")
	if code, _, stderr := run(t, t.Context(), "export", out+".state.db", "--out", exported); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	want, _ := outputsByIndex(t, out)
	got, n := outputsByIndex(t, exported)
	if n != resumeInputs {
		t.Errorf("export wrote %d lines, want %d", n, resumeInputs)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exported outputs (-run +export):\n%s", diff)
	}
}

func TestRunWithReduce(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?seed=3&tool_turns=0"
task: "Summarise paper {id}."
output_schema:
  type: object
  properties: {summary: {type: string}, count: {type: integer}}
  required: [summary, count]
reduce:
  task: "Combine these summaries into one: {outputs}"
  group_size: 5
  output_schema:
    type: object
    properties: {summary: {type: string}, count: {type: integer}}
    required: [summary, count]
`)
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	in := writeFile(t, dir, "in.jsonl", b.String())
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "reduce: 50 outputs in 13 calls over 3 levels") {
		t.Errorf("summary lacks the reduce line:\n%s", stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out.reduce.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Summary *string `json:"summary"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Summary == nil {
		t.Errorf("reduce output %q: %v, want a summary", data, err)
	}
}
