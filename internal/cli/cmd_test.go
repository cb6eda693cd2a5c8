package cli_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestContradictoryFlags: flags that contradict each other are a usage
// error naming both, and nothing is written: no state file, no output.
func TestContradictoryFlags(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"state and no-state", []string{"--state", "STATE", "--no-state"}, []string{"--state", "--no-state"}},
		{"empty state and no-state", []string{"--state=", "--no-state"}, []string{"--state", "--no-state"}},
		{"no-state and retry-failed", []string{"--no-state", "--retry-failed"}, []string{"--retry-failed", "--no-state"}},
		{"no-state and force", []string{"--force", "--no-state"}, []string{"--force", "--no-state"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, job := newJob(t, "")
			in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
			out := filepath.Join(dir, "out.jsonl")
			state := filepath.Join(dir, "x.db")
			args := []string{"run", job, "--inputs", in, "--out", out, "--quiet"}
			for _, f := range tt.flags {
				args = append(args, strings.ReplaceAll(f, "STATE", state))
			}
			code, _, stderr := run(t, t.Context(), args...)
			if code != 2 {
				t.Errorf("Main(%q) = %d, want 2; stderr:\n%s", args, code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %s:\n%s", w, stderr)
				}
			}
			for _, p := range []string{state, out, out + ".state.db"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written, want nothing", filepath.Base(p))
				}
			}
		})
	}
}

// TestHelp: every command prints useful help on stdout: its usage line,
// what it does and its flags.
func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"help", "run"}, []string{"batchagent run JOB.yaml [flags]", "one agent per input", "--out", "--no-state", "--retry-failed", "--log-level"}},
		{[]string{"run", "-h"}, []string{"batchagent run JOB.yaml [flags]", "--inputs", "--backend"}},
		{[]string{"run", "--help"}, []string{"batchagent run JOB.yaml [flags]"}},
		{[]string{"sim", "-h"}, []string{"batchagent sim", "serve", "OpenAI-compatible"}},
		{[]string{"sim", "serve", "-h"}, []string{"batchagent sim serve [flags]", "continuous-batching", "--max-seqs", "--kv-cache-tokens", "--fault", "--addr"}},
		{[]string{"help", "sim", "serve"}, []string{"batchagent sim serve [flags]"}},
		{[]string{"bench", "-h"}, []string{"batchagent bench SCENARIO [flags]", "fair, slots, scale, server, dedup", "agentic", "--time-scale", "-n, --n", "--json", "--fail", "--mode"}},
		{[]string{"status", "-h"}, []string{"batchagent status {STATE.db | --redis URL} [flags]", "--agent", "--json", "--redis"}},
		{[]string{"worker", "-h"}, []string{"batchagent worker --redis URL [flags]", "--max-active", "--visibility", "--grace", "SIGTERM"}},
		{[]string{"export", "-h"}, []string{"batchagent export STATE.db [flags]", "--out"}},
		{[]string{"help"}, []string{"run", "status", "export", "bench", "sim", "worker", "version", "completion"}},
		{[]string{"--help"}, []string{"Available Commands", "dry-run"}},
		{[]string{"help", "dry-run"}, []string{"--dry-run reads the job", "--sample K"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, t.Context(), tt.args...)
			if code != 0 {
				t.Fatalf("Main(%q) = %d, want 0; stderr:\n%s", tt.args, code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// TestRunHelpFitsAScreen: `run --help` fits one screen of 80 columns:
// at most 50 lines, and no line of the command's own (its global flags
// aside) wider than 80, so that none wraps.
func TestRunHelpFitsAScreen(t *testing.T) {
	code, stdout, stderr := run(t, t.Context(), "run", "--help")
	if code != 0 {
		t.Fatalf("run --help: exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) > 50 {
		t.Errorf("run --help has %d lines, want 50 at most:\n%s", len(lines), stdout)
	}
	own, _, _ := strings.Cut(stdout, "Global Flags:")
	for _, l := range strings.Split(own, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("run --help line is %d columns, want 80 at most: %q", n, l)
		}
	}
}

// TestUsageErrors: unknown commands and flags, missing arguments and bad
// global flags exit 2 with a message that names the problem.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"sim", "frob"}, `unknown command "frob"`},
		{[]string{"sim"}, "want a command: serve"},
		{[]string{"bench"}, "want one scenario"},
		{[]string{"bench", "fair", "--frob"}, "unknown flag: --frob"},
		{[]string{"bench", "fair", "-json"}, "unknown shorthand flag"},
		{[]string{"status"}, "want exactly one state file"},
		{[]string{"export", "a", "b"}, "want exactly one state file"},
		{[]string{"version", "x"}, `unknown command "x"`},
		{[]string{"help", "frob"}, `unknown help topic "frob"`},
		{[]string{"help", "sim", "frob"}, `unknown help topic "sim frob"`},
		{[]string{"--log-level", "loud", "version"}, `--log-level "loud"`},
		{[]string{"--log-format", "xml", "version"}, `--log-format "xml"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, t.Context(), tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("Main(%q) = %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
			}
		})
	}
}

// TestVersion prints the module version and the Go version of the build.
func TestVersion(t *testing.T) {
	code, stdout, stderr := run(t, t.Context(), "version")
	if code != 0 || !strings.HasPrefix(stdout, "batchagent ") || !strings.Contains(stdout, "go1.") {
		t.Errorf("version = %d, %q (stderr %q); want 0 and \"batchagent VERSION ... go1.N\"", code, stdout, stderr)
	}
}

// TestCompletion prints cobra's shell completion scripts.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, stderr := run(t, t.Context(), "completion", shell)
		if code != 0 || !strings.Contains(stdout, "batchagent") {
			t.Errorf("completion %s = %d, %d bytes (stderr %q); want 0 and a script", shell, code, len(stdout), stderr)
		}
	}
	// Dynamic completion of bench scenarios.
	code, stdout, _ := run(t, t.Context(), "__complete", "bench", "")
	if code != 0 || !strings.Contains(stdout, "fair") || !strings.Contains(stdout, "dedup") {
		t.Errorf("completing bench = %d, %q; want the scenarios", code, stdout)
	}
}

// TestFlagsAfterArgs: GNU-style flags may come before and after the
// positional argument, and -n is short for --n.
func TestFlagsAfterArgs(t *testing.T) {
	code, stdout, stderr := run(t, t.Context(), "bench", "--mode", "engine", "fair", "-n", "5", "--json", "--fail", "0")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var r struct {
		Mode string `json:"mode"`
		N    int    `json:"n"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &r); err != nil || r.Mode != "engine" || r.N != 5 {
		t.Errorf("bench output %q (%v), want one engine line with n 5", stdout, err)
	}
}

// startProbeFailingSim serves the HTTP simulator with a /metrics endpoint
// that always fails, so that the engine's queue probe warns.
func startProbeFailingSim(t *testing.T) string {
	t.Helper()
	addr, _ := startWrappedSimServer(t, simhttp.Config{Model: sim.Config{Seed: 3}, MaxSeqs: 4,
		PrefillPerToken: time.Microsecond, DecodeStep: 5 * time.Millisecond}, func(srv http.Handler) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/", srv)
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "metrics broken", http.StatusInternalServerError)
		})
		return mux
	})
	return addr
}

// TestLogFlags: the engine's warnings (a failing queue probe) reach stderr
// at the default level, as JSON with --log-format json, and not at all
// with --log-level error.
func TestLogFlags(t *testing.T) {
	addr := startProbeFailingSim(t)
	tests := []struct {
		name    string
		global  []string
		want    []string
		wantNot string
	}{
		{"default", nil, []string{"level=WARN", "queue probe failed"}, ""},
		{"json", []string{"--log-format", "json"}, []string{`"level":"WARN"`, `"msg":"queue probe failed`}, ""},
		{"error level", []string{"--log-level", "error"}, nil, "queue probe failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			args := append(append([]string{}, tt.global...), "run", "../../examples/review/job.yaml", "--out", out,
				"--backend", "sim+http://"+addr+"/v1", "--no-state", "--quiet")
			code, _, stderr := run(t, t.Context(), args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.wantNot != "" && strings.Contains(stderr, tt.wantNot) {
				t.Errorf("stderr has %q:\n%s", tt.wantNot, stderr)
			}
		})
	}
}

// TestSummaryConcurrency: the summary names the limit on model calls in
// flight and where it comes from: the openai+http flavor's default of 16,
// or the job file's limits.max_inflight.
func TestSummaryConcurrency(t *testing.T) {
	addr, _ := startSimServer(t, simhttp.Config{Model: sim.Config{Seed: 3}, MaxSeqs: 4,
		PrefillPerToken: time.Microsecond, DecodeStep: time.Millisecond})
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--backend", "openai+http://"+addr+"/v1")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if want := "concurrency: adaptive, start 16 (max 16: openai+http default; limits.max_inflight sets it)"; !strings.Contains(stderr, want) {
		t.Errorf("summary lacks %q:\n%s", want, stderr)
	}

	dir, job = newJob(t, "limits:\n  max_inflight: 3\n  fixed_inflight: true\n")
	in = writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	code, _, stderr = run(t, t.Context(), "run", job, "--inputs", in)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if want := "concurrency: fixed 3 (max 3: limits.max_inflight)"; !strings.Contains(stderr, want) {
		t.Errorf("summary lacks %q:\n%s", want, stderr)
	}
}

// TestSimURLModel: sim:// takes ?model= like every backend URL.
func TestSimURLModel(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--quiet", "--backend", "sim://?model=sim-7b&seed=2")
	if code != 0 || len(readLines(t, stdout)) != 1 {
		t.Errorf("run with sim://?model=: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}
