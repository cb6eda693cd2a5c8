package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetryFailedReplacesFailedLines fails some or all inputs, then resumes
// with --retry-failed and a backend that answers well: the failed lines
// are replaced by the new results, the good ones kept as they were, and
// every input ends with exactly one line.
func TestRetryFailedReplacesFailedLines(t *testing.T) {
	tests := []struct {
		name    string
		invalid string // the failing run's share of invalid answers
	}{
		{"all failed", "1"},
		{"some failed", "0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, job := newJob(t, "")
			var b strings.Builder
			for i := range 6 {
				fmt.Fprintf(&b, "{\"id\":%d}\n", i)
			}
			in := writeFile(t, dir, "in.jsonl", b.String())
			out := filepath.Join(dir, "out.jsonl")
			args := []string{"run", job, "--inputs", in, "--out", out}
			code, _, stderr := run(t, t.Context(), append(args, "--backend", "sim://?seed=2&invalid="+tt.invalid, "--quiet")...)
			if code != 1 {
				t.Fatalf("failing run: exit %d, want 1\n%s", code, stderr)
			}
			first, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var okLines []string
			failed := 0
			for s := range strings.Lines(string(first)) {
				if strings.Contains(s, `"error":`) {
					failed++
				} else {
					okLines = append(okLines, s)
				}
			}
			if failed == 0 {
				t.Fatalf("failing run: no failed line\n%s", first)
			}

			// The backend changed (no invalid answers): --force.
			code, _, stderr = run(t, t.Context(), append(args, "--force", "--retry-failed")...)
			if code != 0 {
				t.Fatalf("resume with --retry-failed: exit %d\n%s", code, stderr)
			}
			for _, want := range []string{"ok 6 · failed 0", fmt.Sprintf("(%d lines written)", failed)} {
				if !strings.Contains(stderr, want) {
					t.Errorf("summary lacks %q:\n%s", want, stderr)
				}
			}
			if len(okLines) > 0 && !strings.Contains(stderr, fmt.Sprintf("resumed: %d results were already in the output", len(okLines))) {
				t.Errorf("summary does not count the %d lines kept:\n%s", len(okLines), stderr)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for _, l := range readLines(t, string(got)) {
				if l.Error != nil || seen[l.Index] {
					t.Errorf("after --retry-failed, index %d is failed (%+v) or written twice", l.Index, l.Error)
				}
				seen[l.Index] = true
			}
			if len(seen) != 6 {
				t.Errorf("after --retry-failed, %d inputs have a line, want 6:\n%s", len(seen), got)
			}
			// The good lines are kept, first and as they were.
			if kept := strings.Join(okLines, ""); !bytes.HasPrefix(got, []byte(kept)) {
				t.Errorf("output after --retry-failed does not start with the %d good lines of the failing run:\n%s\nwant prefix:\n%s", len(okLines), got, kept)
			}
		})
	}
}

// TestFailedRunLeavesNoState makes a usage error that only the inputs
// reveal: no state file is left behind, so the corrected command starts
// afresh instead of resuming onto an unrelated output file.
func TestFailedRunLeavesNoState(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	// An output file of something else, made without a state file.
	out := writeFile(t, dir, "out.jsonl", "{\"index\":0,\"output\":{\"value\":-999}}\n")
	state := out + ".state.db"
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", filepath.Join(dir, "nope.jsonl"), "--out", out, "--quiet")
	if code != 2 || !strings.Contains(stderr, "nope.jsonl") {
		t.Fatalf("run with missing inputs: exit %d, stderr %q; want 2 naming the file", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state file after a failed invocation: %v, want none", err)
	}
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet"); code != 0 {
		t.Fatalf("corrected run: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, l := range readLines(t, string(b)) {
		if l.Output["value"] == -999.0 {
			t.Errorf("corrected run kept the old line %+v", l)
		}
		idx = append(idx, l.Index)
	}
	if len(idx) != 2 {
		t.Errorf("corrected run wrote lines for indexes %v, want 0 and 1 only", idx)
	}
}

// TestInputCount checks the number of inputs a run records for `status`:
// blank lines of a JSONL file are no inputs, and a CSV record may span
// lines.
func TestInputCount(t *testing.T) {
	tests := []struct {
		name, file, content string
		want                int
	}{
		{"jsonl with blank lines", "in.jsonl", "\ufeff{\"id\":1}\n\n  \t\r\n{\"id\":2}\r\n   \n{\"id\":3}", 3},
		{"csv with a multi-line record", "in.csv", "id,note\n1,\"two\nlines\"\n2,\"three\n\nlines\"\n", 2},
		{"csv header only", "in.csv", "id,note\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, job := newJob(t, "")
			in := writeFile(t, dir, tt.file, tt.content)
			out := filepath.Join(dir, "out.jsonl")
			if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet"); code != 0 {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			_, stdout, stderr := run(t, t.Context(), "status", out+".state.db")
			want := fmt.Sprintf("%d inputs · pending 0 · done %d · failed 0", tt.want, tt.want)
			if tt.want == 0 {
				want = "done 0 · failed 0" // no count recorded: unknown
			}
			if !strings.Contains(stdout, want) {
				t.Errorf("status = %q (stderr %q), want %q", stdout, stderr, want)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(readLines(t, string(b))); n != tt.want {
				t.Errorf("%d result lines, want %d", n, tt.want)
			}
		})
	}
}
