package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesOutputNamingAFileItReads runs with --out or --state naming
// a file the run reads (the inputs, the job file, the schema file), spelt
// in several ways, or with --state naming the --out file: each is refused
// with exit 2 naming both, before anything is written, and the file read
// is left byte for byte as it was.
func TestRunRefusesOutputNamingAFileItReads(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := writeFile(t, dir, "schema.json", `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)
	job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=2&tool_turns=0\"\ntask: \"Item {id}\"\noutput_schema: schema.json\n")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	t.Chdir(dir) // for the relative spellings

	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"out is the inputs", []string{"--out", in}, []string{"--out " + in + " is the inputs file " + in}},
		{"out is ./inputs", []string{"--out", "./in.jsonl"}, []string{"--out ./in.jsonl is the inputs file " + in}},
		{"out is dir/../inputs", []string{"--out", "sub/../in.jsonl"}, []string{"--out sub/../in.jsonl is the inputs file " + in}},
		{"out is a symlink to the inputs", []string{"--out", link}, []string{"--out " + link + " is the inputs file " + in}},
		{"out is a hard link to the inputs", []string{"--out", hard}, []string{"--out " + hard + " is the inputs file " + in}},
		{"out is the job file", []string{"--out", job}, []string{"--out " + job + " is the job file " + job}},
		{"out is the schema file", []string{"--out", schema}, []string{"--out " + schema + " is the output schema file " + schema}},
		{"state is the inputs", []string{"--out", out, "--state", in}, []string{"--state " + in + " is the inputs file " + in}},
		{"state is the job file", []string{"--out", out, "--state", "job.yaml"}, []string{"--state job.yaml is the job file " + job}},
		{"state is the out file", []string{"--out", out, "--state", out}, []string{"--state " + out + " is the --out file " + out + ": give the state file a name of its own (pick another --state)"}},
		{"state is the out file spelt otherwise", []string{"--out", out, "--state", "./out.jsonl"}, []string{"--state ./out.jsonl is the --out file " + out}},
	}
	files := []string{in, job, schema}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := map[string][]byte{}
			for _, p := range files {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				before[p] = b
			}
			args := append([]string{"run", job, "--inputs", in, "--quiet"}, tt.flags...)
			code, _, stderr := run(t, t.Context(), args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "another run") {
				t.Errorf("stderr blames another run:\n%s", stderr)
			}
			for _, p := range files {
				if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, before[p]) {
					t.Errorf("%s changed: %q (err %v), was %q", p, b, err, before[p])
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if n := e.Name(); strings.HasSuffix(n, ".lock") || strings.Contains(n, ".state.db") || n == "out.jsonl" {
					t.Errorf("%s was created by a refused run", n)
				}
			}
		})
	}
}

// TestRedisAndBatchRunsRefuseOutputNamingTheirInput gives run --redis and
// run --openai-batch an --out naming the file they read: exit 2 naming
// both, the file as it was (the Redis named is never reached).
func TestRedisAndBatchRunsRefuseOutputNamingTheirInput(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "task: \"Item {id}\"\n")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	batch := writeFile(t, dir, "batch.jsonl", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`+"\n")
	tests := []struct {
		name string
		args []string
		file string
		want string
	}{
		{"redis out is the inputs", []string{"run", job, "--inputs", in, "--out", in, "--redis", "redis://127.0.0.1:1"}, in, "--out " + in + " is the inputs file " + in},
		{"redis out is the job file", []string{"run", job, "--inputs", in, "--out", job, "--redis", "redis://127.0.0.1:1"}, job, "--out " + job + " is the job file " + job},
		{"batch out is its input", []string{"run", "--openai-batch", batch, "--out", batch, "--backend", "sim://"}, batch, "--out " + batch + " is the --openai-batch file " + batch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			code, _, stderr := run(t, t.Context(), tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tt.want)
			}
			if b, err := os.ReadFile(tt.file); err != nil || !bytes.Equal(b, before) {
				t.Errorf("%s changed: %q (err %v), was %q", tt.file, b, err, before)
			}
		})
	}
}

// TestExportRefusesOutputNamingTheStateFile exports a state file onto
// itself: exit 2 naming both, the state file as it was.
func TestExportRefusesOutputNamingTheStateFile(t *testing.T) {
	dir, job, in := smallJob(t, 3)
	out := filepath.Join(dir, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	state := out + ".state.db"
	before, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, t.Context(), "export", state, "--out", state)
	if want := "--out " + state + " is the state file " + state; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("export onto its state file: exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, want)
	}
	if b, err := os.ReadFile(state); err != nil || !bytes.Equal(b, before) {
		t.Errorf("%s changed (err %v): %d bytes, was %d", state, err, len(b), len(before))
	}
}
