package config_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/tool/filetool"
)

// writeFile writes content to dir/name, creating parent directories, and
// returns the file's path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mkdir creates dir/name and returns its path.
func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

const fullJob = `# A job using every key.
name: triage
model: gpt-4o-mini
backend: sim://?latency=60ms&tool_turns=1
system: You label tickets.
task: "Label this ticket: {text} ({{not a placeholder}})"
inputs: tickets.jsonl
output: out/labels.jsonl
output_schema:
  type: object
  required: [label]
  properties:
    label: {type: string, enum: [bug, feature]}
    score: {type: number, minimum: 0, maximum: 1.5}
tools:
  - name: read_file
    roots: [docs, $OTHER]
    max_bytes: 65536
    cacheable: false
limits:
  max_turns: 4
  max_inflight: 16
  max_active: 100
  max_retries: 0
  timeout: 2m
`

func TestLoadFullJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	docs := mkdir(t, dir, "docs")
	other := mkdir(t, t.TempDir(), "other")
	path := writeFile(t, dir, "job.yaml", strings.ReplaceAll(fullJob, "$OTHER", other))

	got, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load(%q) error = %v", path, err)
	}
	want := &config.Job{
		Def: job.Def{
			ID:           "triage",
			ModelName:    "gpt-4o-mini",
			System:       "You label tickets.",
			Task:         "Label this ticket: {text} ({{not a placeholder}})",
			OutputSchema: json.RawMessage(`{"type":"object","required":["label"],"properties":{"label":{"type":"string","enum":["bug","feature"]},"score":{"type":"number","minimum":0,"maximum":1.5}}}`),
			MaxTurns:     4,
			NoRetries:    true,
			Timeout:      2 * time.Minute,
		},
		Engine: batchagent.Config{
			MaxActive: 100,
			Admission: batchagent.Admission{MaxInflight: 16},
		},
		Backend: "sim://?latency=60ms&tool_turns=1",
		Inputs:  filepath.Join(dir, "tickets.jsonl"),
		Output:  filepath.Join(dir, "out", "labels.jsonl"),
		Tools: []config.Tool{{
			Name:     "read_file",
			Settings: &filetool.ReadFileConfig{Roots: []string{docs, other}, MaxBytes: 65536, Cacheable: false},
		}},
		Dir:  dir,
		Path: path,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%q) mismatch (-want +got):\n%s", path, diff)
	}
}

func TestParseMinimalJob(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte("task: Summarise {doc}\n"), "job.yaml", "/jobs")
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	want := &config.Job{
		Def:     job.Def{Task: "Summarise {doc}"},
		Backend: config.DefaultBackend,
		Dir:     "/jobs",
		Path:    "job.yaml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
}

func TestParseRelativeDir(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte("task: x\ninputs: in.jsonl\n"), "job.yaml", "jobs")
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "jobs"); got.Dir != want {
		t.Errorf("Parse(dir %q).Dir = %q, want %q", "jobs", got.Dir, want)
	}
	if want := filepath.Join(wd, "jobs", "in.jsonl"); got.Inputs != want {
		t.Errorf("Parse(dir %q).Inputs = %q, want %q", "jobs", got.Inputs, want)
	}
}

func TestParseAliasesAndMerge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	docs := mkdir(t, dir, "docs")
	const in = `task: &t "Read {path}"
system: *t
tools:
  - <<: {name: read_file, roots: [docs], max_bytes: 10}
    max_bytes: 20
output_schema:
  definitions:
    base: &base {type: string, minLength: 1}
  properties:
    a: {<<: *base, maxLength: 5}
`
	got, err := config.Parse([]byte(in), "job.yaml", dir)
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	wantTools := []config.Tool{{Name: "read_file", Settings: &filetool.ReadFileConfig{Roots: []string{docs}, MaxBytes: 20, Cacheable: true}}}
	if diff := cmp.Diff(wantTools, got.Tools); diff != "" {
		t.Errorf("Parse().Tools mismatch (-want +got):\n%s", diff)
	}
	if got.Def.System != "Read {path}" {
		t.Errorf("Parse().Def.System = %q, want %q", got.Def.System, "Read {path}")
	}
	const wantSchema = `{"definitions":{"base":{"type":"string","minLength":1}},"properties":{"a":{"maxLength":5,"type":"string","minLength":1}}}`
	if string(got.Def.OutputSchema) != wantSchema {
		t.Errorf("Parse().Def.OutputSchema = %s, want %s", got.Def.OutputSchema, wantSchema)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := config.Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(%q) error = %v, want fs.ErrNotExist", path, err)
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		t.Errorf("Load(%q) error is a *config.Error, want an I/O error", path)
	}
}

// TestMarshalRoundTrip checks that a parsed job marshals to YAML that
// parses back to the same job, as "config check" relies on.
func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkdir(t, dir, "docs")
	other := mkdir(t, t.TempDir(), "other")
	writeFile(t, dir, "schema.json", `{"type": "object"}`)

	for _, in := range []string{
		strings.ReplaceAll(fullJob, "$OTHER", other),
		"task: x\noutput_schema: schema.json\n",
		"task: x\n",
		knobsJob,
		tiersJob,
		"task: x\npack: {max_agents: 2}\nfallbacks: [{backend: \"sim://\"}, {backend: \"sim://?seed=1\", model: m, api_key_env: K}]\n",
		"task:\n  - text: a {t}\n  - text: b\n  - image: \"{photo}\"\n    detail: low\n  - file: \"{scan}\"\nmedia: {roots: [docs], max_bytes: 512KiB, fetch: [cdn.example.com], pass_urls: true}\n",
		"task: [{audio: \"{clip}\"}]\n",
	} {
		first, err := config.Parse([]byte(in), "job.yaml", dir)
		if err != nil {
			t.Fatalf("Parse(%q) error = %v", in, err)
		}
		out, err := yaml.Marshal(first)
		if err != nil {
			t.Fatalf("yaml.Marshal(%+v) error = %v", first, err)
		}
		second, err := config.Parse(out, "job.yaml", dir)
		if err != nil {
			t.Fatalf("Parse(Marshal(Parse(%q))) error = %v\n%s", in, err, out)
		}
		if diff := cmp.Diff(first, second); diff != "" {
			t.Errorf("Parse(Marshal(Parse(%q))) mismatch (-first +second):\n%s\nmarshalled:\n%s", in, diff, out)
		}
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    config.Duration
		wantErr string
	}{
		{in: `"90s"`, want: config.Duration(90 * time.Second)},
		{in: `1h30m`, want: config.Duration(90 * time.Minute)},
		{in: `30`, wantErr: `invalid duration 30: want a duration like "30s"`},
		{in: `"30"`, wantErr: `invalid duration "30": want a duration like "30s"`},
		{in: `[1]`, wantErr: `want a duration like "30s", got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var got config.Duration
			err := yaml.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("Unmarshal(%s) error = %v, want %s", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Unmarshal(%s) = %v, %v, want %v, nil", tt.in, got, err, tt.want)
			}
		})
	}
	if got, want := config.Duration(90*time.Second).String(), "1m30s"; got != want {
		t.Errorf("Duration(90s).String() = %q, want %q", got, want)
	}
}

// mkdirAll and writeBytes are for callers without a *testing.T.
func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func writeBytes(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

func TestParsePolicy(t *testing.T) {
	j, err := config.Parse([]byte("task: x\nlimits:\n  policy: las\n  continuation: 2s\n"), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a := j.Engine.Admission; a.Policy != batchagent.PolicyLAS || a.Continuation != 2*time.Second {
		t.Errorf("policy, continuation = %v, %v; want las, 2s", a.Policy, a.Continuation)
	}
	out, err := yaml.Marshal(j)
	if err != nil || !strings.Contains(string(out), "policy: las") || !strings.Contains(string(out), "continuation: 2s") {
		t.Errorf("Marshal = %q, %v; want policy: las and continuation: 2s", out, err)
	}
	j, err = config.Parse([]byte("task: x\nlimits:\n  continuation: off\n"), "job.yaml", t.TempDir())
	if err != nil || j.Engine.Admission.Continuation != 0 {
		t.Errorf("continuation: off = %+v, %v; want no continuation", j.Engine.Admission, err)
	}
	for _, tt := range []struct{ in, want string }{
		{"policy: srpt", `job.yaml:3:11: limits.policy: unknown policy "srpt" (known: fifo, turns, las)`},
		{"policy: [las]", "limits.policy"},
		{"continuation: -1s", "limits.continuation"},
	} {
		_, err := config.Parse([]byte("task: x\nlimits:\n  "+tt.in+"\n"), "job.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want it to contain %q", tt.in, err, tt.want)
		}
	}
}

func TestParseAdmissionSettings(t *testing.T) {
	want := batchagent.Admission{
		RateLimit: batchagent.RateLimit{RPM: 500, TPM: 90000, OTPM: 16000}, FixedInflight: true, WarmPrefix: true,
		Backpressure: batchagent.Backpressure{Disabled: true},
	}
	for _, off := range []string{"off", "-1"} { // -1: the deprecated spelling
		j, err := config.Parse([]byte("task: x\nwarm_prefix: true\nlimits:\n  rpm: 500\n  tpm: 90000\n  otpm: 16000\n  fixed_inflight: true\n  max_queued: "+off+"\n"), "job.yaml", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, j.Engine.Admission, cmpopts.IgnoreFields(batchagent.RateLimit{}, "CountTokens")); diff != "" {
			t.Errorf("max_queued: %s: admission (-want +got):\n%s", off, diff)
		}
	}
	_, err := config.Parse([]byte("task: x\nlimits:\n  rpm: -5\n  max_queued: -2\n  otpm: -1\n"), "job.yaml", t.TempDir())
	for _, w := range []string{"job.yaml:3:8: limits.rpm: must not be negative", "job.yaml:4:15: limits.max_queued: must be off or not negative (-1, deprecated, means off too), got -2",
		"job.yaml:5:9: limits.otpm: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Parse(bad limits) = %v, want it to contain %q", err, w)
		}
	}
}
