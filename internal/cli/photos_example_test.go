package cli_test

import (
	"path/filepath"
	"testing"
)

// TestExamplePhotos runs examples/photos/job.yaml as its README section
// does, offline on sim://, and checks that every photo of photos.csv got
// a label and a confidence.
func TestExamplePhotos(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "examples", "photos")
	out := filepath.Join(t.TempDir(), "labels.jsonl")
	code, _, stderr := run(t, t.Context(), "run", filepath.Join(dir, "job.yaml"), "--out", out, "--quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr:\n%s", code, stderr)
	}
	want := countLines(t, filepath.Join(dir, "photos.csv")) - 1 // the header
	lines := readLines(t, readFileString(t, out))
	if len(lines) != want || want < 4 {
		t.Fatalf("%d result lines, want %d (one per photo)", len(lines), want)
	}
	for _, l := range lines {
		if l.Error != nil || l.Output["label"] == nil || l.Output["confidence"] == nil {
			t.Errorf("photo %d (%v): %+v, want a label and a confidence", l.Index, l.Input["photo"], l)
		}
	}
}
