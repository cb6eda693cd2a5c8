package cli_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateCommandsRefuseOtherFiles points status, export and run --state
// at a SQLite file of another program, and at no file: each is refused,
// and the file is neither changed nor created.
func TestStateCommandsRefuseOtherFiles(t *testing.T) {
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	foreign := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"status", []string{"status", foreign}, foreign + ": not a batchagent state file"},
		{"export", []string{"export", foreign, "--out", filepath.Join(dir, "export.jsonl")}, foreign + ": not a batchagent state file"},
		{"run --state", []string{"run", job, "--inputs", in, "--state", foreign, "--quiet"}, foreign + ": not a batchagent state file"},
		{"status of no file", []string{"status", missing}, "no such file"},
		{"export of no file", []string{"export", missing}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, t.Context(), tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
			if after, err := os.ReadFile(foreign); err != nil || !bytes.Equal(after, before) {
				t.Errorf("%s changed (%v)", foreign, err)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Errorf("%s after the command: %v, want no file", missing, err)
			}
		})
	}
}

// TestExportReportsWriteErrors exports to a device that refuses every
// write: the error is reported and the exit status is 1.
func TestExportReportsWriteErrors(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full:", err)
	}
	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	out := filepath.Join(dir, "out.jsonl")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	code, _, stderr := run(t, t.Context(), "export", out+".state.db", "--out", "/dev/full")
	if code != 1 || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("export to /dev/full: exit %d, stderr %q; want 1 and the write error", code, stderr)
	}
}
