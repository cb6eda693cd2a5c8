package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool/filetool"
)

// TestOpenToolsClose checks that a file tool's roots are among what a
// ToolSet closes, and that Close closes them once.
func TestOpenToolsClose(t *testing.T) {
	j := &config.Job{Tools: []config.Tool{{Name: "read_file", Settings: &filetool.ReadFileConfig{Roots: []string{t.TempDir()}}}}}
	ts, err := j.OpenTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ts.Tools) != 1 || len(ts.Closers) != 1 {
		t.Fatalf("%d tools, %d closers for one read_file tool, want 1 and its roots", len(ts.Tools), len(ts.Closers))
	}
	if _, ok := ts.Policies["read_file"]; !ok {
		t.Errorf("policies %v, want read_file's", ts.Policies)
	}
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ts.Close(); err != nil || ts.Closers != nil {
		t.Errorf("second Close = %v with closers %v, want nil and none", err, ts.Closers)
	}
	if _, err := ts.Tools[0].Call(t.Context(), json.RawMessage(`{"path":"x"}`)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("read_file after Close: %v, want a closed error", err)
	}
}
