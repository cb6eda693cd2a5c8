package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/report"
)

// TestReportWriteFile writes the page readable by all, replacing an
// earlier file and leaving no temporary file; a directory that is not
// there is an error.
func TestReportWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.report.html")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteFile(path, &report.Data{Info: report.Info{Job: "j"}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "<html") {
		t.Fatalf("read %s: %v, %.100q; want the page", path, err, b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("dir holds %v; want the report only", ents)
	}
	bad := filepath.Join(dir, "no", "r.html")
	if err := report.WriteFile(bad, &report.Data{}); err == nil {
		t.Errorf("WriteFile(%s): want an error", bad)
	}
}
