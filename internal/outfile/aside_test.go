package outfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/google/go-cmp/cmp"
)

// TestMoveAsideTakesOneFreeNumber moves an output and a state file with
// its -wal aside, where out.jsonl.1 is taken: both go to .2, the -wal
// with its state file, and paths that are empty or missing are skipped.
func TestMoveAsideTakesOneFreeNumber(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	state := out + ".state.db"
	for _, p := range []string{out, out + ".1", state, state + "-wal"} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := outfile.MoveAside(out, "", state, filepath.Join(dir, "missing.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []outfile.Aside{{out, out + ".2"}, {state, state + ".2"}, {state + "-wal", state + ".2-wal"}}
	if diff := cmp.Diff(want, moved); diff != "" {
		t.Errorf("MoveAside moved (-want +got):\n%s", diff)
	}
	for _, m := range moved {
		if got, err := os.ReadFile(m.To); err != nil || string(got) != m.From {
			t.Errorf("%s = %q, %v, want the content of %s", m.To, got, err, m.From)
		}
		if _, err := os.Stat(m.From); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", m.From, err)
		}
	}
}
