package cli_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// quickBackend answers at once; slowJob's jobs are valid against it.
const quickBackend = "sim://?seed=4&tool_turns=0"

// writeInputs writes one JSONL line per id.
func writeInputs(t *testing.T, dir, name string, ids []string) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "{\"id\":%q}\n", id)
	}
	return writeFile(t, dir, name, b.String())
}

func ids(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("x%d", i)
	}
	return s
}

// resultsByIndex reads a results file into each index's input id and
// output, failing on a duplicated index or a failed result.
func resultsByIndex(t *testing.T, path string) (inputs map[int]string, outputs map[int]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	inputs, outputs = map[int]string{}, map[int]string{}
	for _, l := range readLines(t, string(b)) {
		if _, dup := inputs[l.Index]; dup {
			t.Errorf("%s: index %d written twice", path, l.Index)
		}
		if l.Error != nil {
			t.Errorf("%s: index %d failed: %+v", path, l.Index, l.Error)
		}
		inputs[l.Index] = fmt.Sprint(l.Input["id"])
		outputs[l.Index] = fmt.Sprint(l.Output)
	}
	return inputs, outputs
}

// checkAnswersInputs checks that the results file holds one line per id,
// each answering the input at its index, with the output a fresh run on
// those inputs gives.
func checkAnswersInputs(t *testing.T, job, out string, want []string) {
	t.Helper()
	gotIn, gotOut := resultsByIndex(t, out)
	wantIn := map[int]string{}
	for i, id := range want {
		wantIn[i] = id
	}
	if diff := cmp.Diff(wantIn, gotIn); diff != "" {
		t.Errorf("inputs answered by index (-want +got):\n%s", diff)
	}
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.jsonl")
	in := writeInputs(t, dir, "in.jsonl", want)
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", fresh, "--backend", quickBackend, "--quiet"); code != 0 {
		t.Fatalf("fresh run: exit %d\n%s", code, stderr)
	}
	_, wantOut := resultsByIndex(t, fresh)
	if diff := cmp.Diff(wantOut, gotOut); diff != "" {
		t.Errorf("outputs by index differ from a fresh run on the new inputs (-fresh +resumed):\n%s", diff)
	}
}

// TestResumeWithChangedInputs resumes a finished run with an edited,
// reordered or extended inputs file: a change is refused naming its line,
// leaving the output as it was; --force runs the changed inputs again; an
// input added at the end just runs. No input is ever answered with
// another's result.
func TestResumeWithChangedInputs(t *testing.T) {
	edited, reordered := ids(20), ids(20)
	edited[5] = "edited"
	reordered[3], reordered[4] = reordered[4], reordered[3]
	tests := []struct {
		name    string
		inputs  []string
		refused string // what the refusal names; "" for none
	}{
		{"edited", edited, "in.jsonl:6: input 5 differs"},
		{"reordered", reordered, "in.jsonl:4: input 3 differs"},
		{"removed at the end", ids(19), "input 19 is no longer in"},
		{"added at the end", append(ids(20), "new"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, job, _, _ := slowJob(t, 0)
			out := filepath.Join(dir, "out.jsonl")
			in := writeInputs(t, dir, "in.jsonl", ids(20))
			args := []string{"run", job, "--inputs", in, "--out", out, "--backend", quickBackend, "--quiet"}
			if code, _, stderr := run(t, t.Context(), args...); code != 0 {
				t.Fatalf("first run: exit %d\n%s", code, stderr)
			}
			before, _ := os.ReadFile(out)
			writeInputs(t, dir, "in.jsonl", tt.inputs)
			code, _, stderr := run(t, t.Context(), args...)
			if tt.refused == "" {
				if code != 0 {
					t.Fatalf("resume: exit %d\n%s", code, stderr)
				}
				checkAnswersInputs(t, job, out, tt.inputs)
				return
			}
			if code != 2 || !strings.Contains(stderr, tt.refused) || !strings.Contains(stderr, "--force") {
				t.Errorf("resume: exit %d, stderr %q; want 2 naming %q and --force", code, stderr, tt.refused)
			}
			if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
				t.Errorf("the refused resume changed the output")
			}
			if code, _, stderr := run(t, t.Context(), append(args, "--force")...); code != 0 {
				t.Fatalf("resume with --force: exit %d\n%s", code, stderr)
			}
			checkAnswersInputs(t, job, out, tt.inputs)
		})
	}
}

// TestResumeWithChangedInputsAfterKill kills a run mid-way, reorders its
// inputs and resumes with --force: every input is answered with its own
// result.
func TestResumeWithChangedInputsAfterKill(t *testing.T) {
	const n = 60
	dir, job, _, backend := slowJob(t, 0)
	out := filepath.Join(dir, "out.jsonl")
	in := writeInputs(t, dir, "in.jsonl", ids(n))
	args := []string{"run", job, "--inputs", in, "--out", out, "--backend", backend, "--quiet"}
	c := startChild(t, args...)
	waitUntil(t, "some results", func() bool {
		b, _ := os.ReadFile(out)
		return bytes.Count(b, []byte("\n")) >= 10
	})
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.wait()
	changed := ids(n)
	slices.Reverse(changed)
	writeInputs(t, dir, "in.jsonl", changed)
	if code, _, stderr := run(t, t.Context(), args...); code != 2 || !strings.Contains(stderr, "in.jsonl:1: input 0 differs") {
		t.Errorf("resume with reversed inputs: exit %d, stderr %q; want 2 naming line 1", code, stderr)
	}
	if code, _, stderr := run(t, t.Context(), append(args, "--force")...); code != 0 {
		t.Fatalf("resume with --force: exit %d\n%s", code, stderr)
	}
	checkAnswersInputs(t, job, out, changed)
}

// TestUnreadableStateStopsRun damages the state file of a half-written
// run: the resume exits 2 naming the file and the problem, and writes
// nothing.
func TestUnreadableStateStopsRun(t *testing.T) {
	dir, job, in, _ := slowJob(t, 40)
	out := filepath.Join(dir, "out.jsonl")
	state := out + ".state.db"
	args := []string{"run", job, "--inputs", in, "--out", out, "--backend", quickBackend, "--quiet"}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	// Half the results lost, as if the run had stopped half-way; then
	// garbage over every page of the state file but the first.
	b, _ := os.ReadFile(out)
	lines := bytes.SplitAfter(b, []byte("\n"))
	half := bytes.Join(lines[:20], nil)
	if err := os.WriteFile(out, half, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state + "-wal"); err == nil {
		t.Fatalf("%s-wal left after a finished run: the damage below would miss it", state)
	}
	// The pages of the table of finished states: the file still opens
	// and the run record still reads.
	conn, err := sql.Open("sqlite", state)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int
	err = conn.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'finished'`).Scan(&root)
	if err == nil {
		err = conn.QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	}
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	for i := (root - 1) * pageSize; i < root*pageSize; i++ {
		db[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(state, db, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, t.Context(), args...)
	if code != 2 || !strings.Contains(stderr, state) || !strings.Contains(stderr, "malformed") {
		t.Errorf("resume on a damaged state file: exit %d, stderr %q; want 2 naming %s and the damage", code, stderr, state)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(after, half) {
		t.Errorf("the resume wrote to the output:\n%s", after[len(half):])
	}
}

// TestInputsKeptExactly runs inputs whose numbers float64 cannot hold (an
// integer above 2^53, 1e999) or would reformat (1.10): the input of each
// result line is the input line's text, byte for byte, when the result is
// run, when it is restored from the state file, and when it is exported.
func TestInputsKeptExactly(t *testing.T) {
	dir, job, _, _ := slowJob(t, 0)
	want := []string{
		`{"id":"a","n":1234567890123456789,"x":1.10}`,
		`{"id":"b","n":-98765432109876543210,"x":1e999}`,
		`{"id":"c","n":[9007199254740993,{"m":12345678901234567890123}],"x":0.1000000000000000055511151231257827}`,
	}
	in := writeFile(t, dir, "in.jsonl", strings.Join(want, "\n")+"\n")
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"run", job, "--inputs", in, "--out", out, "--backend", quickBackend, "--quiet", "--ordered"}
	check := func(what, path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for l := range bytes.Lines(b) {
			var v struct {
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(l, &v); err != nil {
				t.Fatalf("%s: line %q: %v", what, l, err)
			}
			got = append(got, string(v.Input))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: inputs of the result lines (-input file +results):\n%s", what, diff)
		}
	}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	check("run", out)
	// The results lost: the resume restores every one from the state file.
	if err := os.WriteFile(out, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, t.Context(), args...); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	check("restored", out)
	exported := filepath.Join(dir, "export.jsonl")
	if code, _, stderr := run(t, t.Context(), "export", out+".state.db", "--out", exported); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	check("exported", exported)
}
