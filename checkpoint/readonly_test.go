package checkpoint_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
)

// TestOpenReadOnly reads what a Store wrote, also while that Store is still
// open (the states are in its write-ahead log), and refuses every write
// without changing the file.
func TestOpenReadOnly(t *testing.T) {
	w, path := open(t, checkpoint.Config{})
	ctx := t.Context()
	if _, err := w.Begin(ctx, "j", checkpoint.Fingerprint{"task": "x"}, false); err != nil {
		t.Fatal(err)
	}
	want := []agent.State{fullState("j", 0), fullState("j", 1)}
	want[1].Status, want[1].Output = agent.StatusRunning, nil
	want[1].Failure, want[1].Raw = nil, ""
	for _, st := range want {
		if err := w.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	r, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly(%q) = %v", path, err)
	}
	defer r.Close()
	checkStates(t, r, "j", want...)
	if jobs, err := r.Jobs(ctx); err != nil || len(jobs) != 1 || jobs[0] != "j" {
		t.Errorf("Jobs() = %v, %v; want [j]", jobs, err)
	}
	st := fullState("j", 2)
	for name, err := range map[string]error{
		"Save":      r.Save(ctx, st),
		"SetInputs": r.SetInputs(ctx, "j", 10),
		"Begin":     func() error { _, err := r.Begin(ctx, "k", checkpoint.Fingerprint{}, false); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), "readonly") {
			t.Errorf("%s on a read-only store = %v, want SQLite's read-only error", name, err)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("the file changed under a read-only store")
	}
	checkStates(t, r, "j", want...)
}

// TestOpenReadOnlyRefuses: a missing file is not created, and a file that
// is not a state file is refused and left as it was.
func TestOpenReadOnlyRefuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := checkpoint.OpenReadOnly(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenReadOnly(missing) = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("OpenReadOnly created the missing file")
	}

	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (x TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := checkpoint.OpenReadOnly(foreign); err == nil || !strings.Contains(err.Error(), "not a batchagent state file") {
		t.Errorf("OpenReadOnly(foreign) = %v, want not a state file", err)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.OpenReadOnly(empty); err == nil || !strings.Contains(err.Error(), "not a batchagent state file") {
		t.Errorf("OpenReadOnly(empty) = %v, want not a state file", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file changed: %v, %v", fi, err)
	}
}
