package outfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/google/go-cmp/cmp"
)

// TestOpenRun opens a run's output anew (truncated), resumed (a torn last
// line and what follows go) and resumed with lines to drop (rewritten
// without them), and appends after what is kept.
func TestOpenRun(t *testing.T) {
	const lines = `{"index":0}` + "\n" + `{"index":2}` + "\n" + `{"index":1}` + "\n" + `{"index":3,"torn`
	for _, tc := range []struct {
		name     string
		resume   bool
		drop     map[int]string
		wantKept []int
		want     string
	}{
		{"new", false, nil, nil, "x\n"},
		{"resumed", true, nil, []int{0, 2, 1}, `{"index":0}` + "\n" + `{"index":2}` + "\n" + `{"index":1}` + "\nx\n"},
		{"dropped", true, map[int]string{2: "1-0"}, []int{0, 1}, `{"index":0}` + "\n" + `{"index":1}` + "\nx\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.jsonl")
			if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
				t.Fatal(err)
			}
			var kept []int
			f, err := outfile.OpenRun(path, tc.resume, tc.drop, func(i int) { kept = append(kept, i) })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("x\n"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantKept, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("file = %q, want %q", got, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("dir holds %d files, want the output alone", len(ents))
			}
		})
	}
}
