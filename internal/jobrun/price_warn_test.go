package jobrun_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/jobrun"
)

// TestUnknownPriceWarnedOnce: a job whose model, and whose fallback
// tier's model, no price covers says so in the run's log once per model,
// however many times the job is opened in the process.
func TestUnknownPriceWarnedOnce(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	yaml := `backend: "sim://?seed=1&tool_turns=0"
model: warn-once-job-model
task: "Item {id}"
fallbacks: [{backend: "sim://", model: warn-once-fallback-model}, {backend: "sim://", model: gpt-4o-mini}]
`
	if err := os.WriteFile(job, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte("{\"id\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	for i := range 2 {
		r, err := jobrun.Open(context.Background(), job, jobrun.Options{Inputs: in, Out: filepath.Join(dir, "out.jsonl"), Restart: i > 0, Logger: logger}, io.Discard)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	got := log.String()
	for _, model := range []string{"warn-once-job-model", "warn-once-fallback-model"} {
		if n := strings.Count(got, "model="+model); n != 1 {
			t.Errorf("log names %s %d times, want once:\n%s", model, n, got)
		}
	}
	if strings.Count(got, "no known price") != 2 {
		t.Errorf("log = %q, want two 'no known price' warnings", got)
	}
	if strings.Contains(got, "gpt-4o-mini") {
		t.Errorf("log warns of gpt-4o-mini, which the table prices:\n%s", got)
	}
}
