package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/checkpoint"
)

// runSmallJob runs a job of 3 inputs with an output file, so a state file
// beside it, and returns the state file's path.
func runSmallJob(t *testing.T) string {
	t.Helper()
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n")
	out := filepath.Join(dir, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d, stderr:\n%s", code, stderr)
	}
	return out + ".state.db"
}

func TestReportWritesBesideTheStateFile(t *testing.T) {
	state := runSmallJob(t)
	code, stdout, stderr := run(t, t.Context(), "report", state)
	if code != 0 {
		t.Fatalf("report: exit %d, stderr:\n%s", code, stderr)
	}
	want := strings.TrimSuffix(state, ".db") + ".report.html"
	if !strings.HasSuffix(want, "out.jsonl.state.report.html") {
		t.Fatalf("default path %s", want)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("report: %v; stderr:\n%s", err, stderr)
	}
	if stdout != "" || !strings.Contains(stderr, "wrote "+want+" (3 agents; results table: all 3 results)") {
		t.Errorf("stdout %q, stderr %q: want nothing and the path written", stdout, stderr)
	}
	for _, w := range []string{`<span class="v" id="done" data-value="3">`, `data-chart="timeline"`, `data-rows="3"`, `data-tool="read_file"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("the report lacks %s", w)
		}
	}
	code, stdout, stderr = run(t, t.Context(), "report", state, "--out", "-")
	if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") || !strings.HasSuffix(stdout, "</html>\n") {
		t.Errorf("report --out -: exit %d, stdout %.40q...; want the page on stdout; stderr:\n%s", code, stdout, stderr)
	}
}

func TestReportBadStateFiles(t *testing.T) {
	dir := t.TempDir()
	good := runSmallJob(t)
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 3000)
	for i := range garbage {
		garbage[i] = byte(i * 7)
	}
	files := map[string][]byte{
		"garbage.db":   garbage,
		"text.db":      []byte("hello\n"),
		"truncated.db": b[:4096],
	}
	tests := []struct {
		name, file, want string
	}{
		{"missing", filepath.Join(dir, "missing.db"), "no such file"},
		{"garbage", filepath.Join(dir, "garbage.db"), "file is not a database"},
		{"text", filepath.Join(dir, "text.db"), "file is not a database"},
		{"truncated", filepath.Join(dir, "truncated.db"), "malformed"},
	}
	for name, data := range files {
		writeFile(t, dir, name, string(data))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name+".html")
			code, _, stderr := run(t, t.Context(), "report", tt.file, "--out", out)
			if code != 2 || !strings.HasPrefix(stderr, "batchagent report: ") || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, tt.file) {
				t.Errorf("report %s: exit %d, stderr %q; want 2 and an error naming the file and %q", tt.name, code, stderr, tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("report %s wrote %s", tt.name, out)
			}
		})
	}
}

func TestReportSeveralJobs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	st, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"alpha", "beta"} {
		if _, err := st.Begin(t.Context(), id, checkpoint.Fingerprint{"task": id}, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, t.Context(), "report", path, "--out", "-")
	if code != 2 || !strings.Contains(stderr, "[alpha beta]") || !strings.Contains(stderr, "--job") {
		t.Errorf("report of two jobs: exit %d, stderr %q; want 2, the jobs listed and --job named", code, stderr)
	}
	code, _, stderr = run(t, t.Context(), "report", path, "--job", "gamma", "--out", "-")
	if code != 2 || !strings.Contains(stderr, "unknown job") {
		t.Errorf("report --job gamma: exit %d, stderr %q; want 2 and unknown job", code, stderr)
	}
	code, stdout, stderr := run(t, t.Context(), "report", path, "--job", "beta", "--out", "-")
	if code != 0 || !strings.Contains(stdout, "<h1>beta</h1>") {
		t.Errorf("report --job beta: exit %d, stderr %q; want the page of beta", code, stderr)
	}
}

func TestRunUIFlags(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"all interfaces", []string{"--ui", ":0"}, []string{`--ui ":0"`, "--ui-public"}},
		{"any address", []string{"--ui", "0.0.0.0:0"}, []string{`--ui "0.0.0.0:0"`, "--ui-public"}},
		{"LAN address", []string{"--ui", "192.168.1.20:8080"}, []string{"192.168.1.20:8080", "loopback"}},
		{"public without ui", []string{"--ui-public"}, []string{"--ui-public", "--ui"}},
		{"linger without ui", []string{"--ui-linger", "1s"}, []string{"--ui-linger", "--ui"}},
		{"negative linger", []string{"--ui", "127.0.0.1:0", "--ui-linger", "-1s"}, []string{"--ui-linger -1s"}},
		{"no port", []string{"--ui", "127.0.0.1"}, []string{`--ui "127.0.0.1"`, "HOST:PORT"}},
		{"redis", []string{"--ui", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1"}, []string{"--ui", "--redis"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, job := newJob(t, "")
			in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
			out := filepath.Join(dir, "out.jsonl")
			args := append([]string{"run", job, "--inputs", in, "--out", out, "--quiet"}, tt.flags...)
			code, _, stderr := run(t, t.Context(), args...)
			if code != 2 {
				t.Errorf("Main(%q) = %d, want 2; stderr:\n%s", args, code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %s:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the output was written, want nothing")
			}
		})
	}
}

func TestRunUILingers(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--ui", "localhost:0", "--ui-linger", "10ms")
	if code != 0 {
		t.Fatalf("run --ui: exit %d, stderr:\n%s", code, stderr)
	}
	m := liveAddr.FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(stderr, "the live view stays at "+m[1]+" for 10ms") {
		t.Errorf("stderr names no live view, or not its lingering:\n%s", stderr)
	}
	// The run's samples are in its state file, for the report.
	st, err := checkpoint.OpenReadOnly(out + ".state.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs, err := st.Jobs(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %v, %v", jobs, err)
	}
	sms, err := st.Samples(t.Context(), jobs[0])
	if err != nil || len(sms) < 2 {
		t.Errorf("the state file holds %d samples (%v), want the first and the last at least", len(sms), err)
	}
	if len(sms) > 0 && !strings.Contains(string(sms[len(sms)-1].Data), `"done":2`) {
		t.Errorf("the last sample = %s, want done 2", sms[len(sms)-1].Data)
	}
}

// TestRunUIEndsWithRun: without --ui-linger (and with --ui-linger 0s) the
// live view ends with the run and so does the process; before, leaving the
// flag out waited for a signal (a run would hang here until the deadline).
func TestRunUIEndsWithRun(t *testing.T) {
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{"no linger", nil},
		{"linger 0s", []string{"--ui-linger", "0s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, job := newJob(t, "")
			in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			args := append([]string{"run", job, "--inputs", in, "--out", filepath.Join(dir, "out.jsonl"), "--ui", "127.0.0.1:0"}, tt.extra...)
			code, _, stderr := run(t, ctx, args...)
			if code != 0 || ctx.Err() != nil {
				t.Fatalf("run --ui %v: exit %d (context: %v), stderr:\n%s", tt.extra, code, ctx.Err(), stderr)
			}
			if !liveAddr.MatchString(stderr) {
				t.Errorf("stderr names no live view:\n%s", stderr)
			}
			if strings.Contains(stderr, "stays at") {
				t.Errorf("stderr says the view stays after the run:\n%s", stderr)
			}
		})
	}
}
