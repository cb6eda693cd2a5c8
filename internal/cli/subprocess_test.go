package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runProcess runs the CLI as a child process (the test binary re-executed
// as batchagent, see TestMain) in dir and returns its exit status, stdout
// and stderr.
func runProcess(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("start %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestCLIItemsAsProcesses runs the command-line defects of issue 11 that
// need no signals or second process (those have their own tests) through a
// real child process: exit status, the stream each message goes to, and
// the files left behind.
func TestCLIItemsAsProcesses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup writes the case's files into dir and returns the arguments.
		setup      func(t *testing.T, dir string) []string
		code       int
		stdout     []string // each must appear in stdout
		stderr     []string // each must appear in stderr
		check      func(t *testing.T, dir, stdout string)
		noFiles    []string // files that must not exist afterwards
		emptyStdio bool     // stdout must be empty
	}{
		{
			name: "contradictory state flags (item 7)",
			setup: func(t *testing.T, dir string) []string {
				_, job := jobIn(t, dir, "")
				in := writeFile(t, dir, "in.jsonl", `{"id":1}`+"\n")
				return []string{"run", job, "--inputs", in, "--out", "out.jsonl", "--state", "x.db", "--no-state"}
			},
			code:       2,
			stderr:     []string{"--state", "--no-state"},
			noFiles:    []string{"x.db", "out.jsonl", "out.jsonl.state.db"},
			emptyStdio: true,
		},
		{
			name: "duplicated key fails that line only (item 10)",
			setup: func(t *testing.T, dir string) []string {
				_, job := jobIn(t, dir, "")
				in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2,\"id\":\"EVIL\"}\n{\"id\":3}\n")
				return []string{"run", job, "--inputs", in, "--out", "out.jsonl", "--ordered", "--quiet"}
			},
			code: 1,
			check: func(t *testing.T, dir, _ string) {
				b, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				lines := readLines(t, string(b))
				if len(lines) != 3 {
					t.Fatalf("%d lines, want 3:\n%s", len(lines), b)
				}
				for i, l := range lines {
					switch {
					case l.Index != i:
						t.Errorf("line %d has index %d", i, l.Index)
					case i == 1 && (l.Error == nil || l.Error.Kind != "input" || !strings.Contains(l.Error.Message, `duplicate key "id"`) || !strings.Contains(l.Error.Message, ":2:")):
						t.Errorf("line 1 = %+v, want an input error naming line 2 and key \"id\"", l)
					case i != 1 && l.Error != nil:
						t.Errorf("line %d failed: %+v", i, l.Error)
					}
				}
			},
		},
		{
			name: "schema reference cycle refused at load (item 11)",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, dir, "cycle.schema.json", `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`)
				job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=2\"\ntask: \"Say {id}\"\noutput_schema: cycle.schema.json\n")
				in := writeFile(t, dir, "in.jsonl", `{"id":1}`+"\n")
				return []string{"run", job, "--inputs", in, "--out", "out.jsonl"}
			},
			code:       2,
			stderr:     []string{"cycle.schema.json", "cycle", "#/$defs/a"},
			noFiles:    []string{"out.jsonl", "out.jsonl.state.db"},
			emptyStdio: true,
		},
		{
			name: "placeholder missing from the CSV header (item 12)",
			setup: func(t *testing.T, dir string) []string {
				job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=2\"\ntask: \"Review {title} by {author}\"\n")
				in := writeFile(t, dir, "in.csv", "id,title\n1,a\n2,b\n")
				return []string{"run", job, "--inputs", in, "--out", "out.jsonl"}
			},
			code:       2,
			stderr:     []string{"{author}", "in.csv"},
			noFiles:    []string{"out.jsonl", "out.jsonl.state.db"},
			emptyStdio: true,
		},
		{
			name: "status --json of a finished run (item 14)",
			setup: func(t *testing.T, dir string) []string {
				_, job := jobIn(t, dir, "")
				in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
				if code, _, stderr := runProcess(t, dir, "run", job, "--inputs", in, "--out", "out.jsonl", "--quiet"); code != 0 {
					t.Fatalf("run: exit %d:\n%s", code, stderr)
				}
				return []string{"status", "out.jsonl.state.db", "--json"}
			},
			code: 0,
			check: func(t *testing.T, _, stdout string) {
				var got struct {
					Inputs, Pending *int
					Done, Failed    int
				}
				if err := json.Unmarshal([]byte(stdout), &got); err != nil {
					t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
				}
				if got.Inputs == nil || *got.Inputs != 2 || got.Pending == nil || *got.Pending != 0 || got.Done != 2 || got.Failed != 0 {
					t.Errorf("status --json = %s, want 2 inputs, 0 pending, 2 done, 0 failed", stdout)
				}
			},
		},
		{
			name:   "help for a command (item 16)",
			setup:  func(*testing.T, string) []string { return []string{"help", "run"} },
			code:   0,
			stdout: []string{"batchagent run JOB.yaml", "--inputs", "--no-state", "--ordered"},
		},
		{
			name:   "sim serve -h (item 16)",
			setup:  func(*testing.T, string) []string { return []string{"sim", "serve", "-h"} },
			code:   0,
			stdout: []string{"--max-seqs", "--fault", "--fault-for"},
		},
		{
			name:   "unknown flag (item 16)",
			setup:  func(*testing.T, string) []string { return []string{"bench", "fair", "--frob"} },
			code:   2,
			stderr: []string{"--frob"},
		},
		{
			name:   "version (item 16)",
			setup:  func(*testing.T, string) []string { return []string{"version"} },
			code:   0,
			stdout: []string{"batchagent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := tt.setup(t, dir)
			code, stdout, stderr := runProcess(t, dir, args...)
			if code != tt.code {
				t.Fatalf("batchagent %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, tt.code, stdout, stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tt.emptyStdio && stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			for _, name := range tt.noFiles {
				if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
					t.Errorf("%s exists after a refused run", name)
				}
			}
			if tt.check != nil {
				tt.check(t, dir, stdout)
			}
		})
	}
}

// jobIn is newJob writing into dir.
func jobIn(t *testing.T, dir, extra string) (string, string) {
	t.Helper()
	writeFile(t, dir, "doc.txt", "hello world\n")
	job := writeFile(t, dir, "job.yaml", `backend: "sim://?seed=2"
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
