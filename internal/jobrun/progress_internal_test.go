package jobrun

import (
	"bytes"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/estimate"
)

// TestProgressShowsRunCounts: a run's progress line shows agents admitted
// and model calls in flight, with the limit and the calls waiting. (How
// the display fits the line to the terminal is tested in
// internal/progress.)
func TestProgressShowsRunCounts(t *testing.T) {
	st := batchagent.Stats{Started: 40, Done: 7, OK: 6, Failed: 1, Inflight: 12, Limit: 16, Waiting: 3}
	line := runCounters(st, 100_000, estimate.Price{}).Line(time.Second)
	if want := "0% 7/100000 · 7.0 agents/s · ETA 3h58m5s · failed 1 · agents 33 · calls 12/16 (+3 waiting) · tokens 0"; line != want {
		t.Errorf("progress line %q, want %q", line, want)
	}
	// An ungated run counts no calls in flight, and an unknown total
	// gives no ETA.
	if line := runCounters(batchagent.Stats{Started: 2}, 0, estimate.Price{}).Line(time.Second); line != "done 0 · 0.0 agents/s · failed 0 · agents 2 · tokens 0" {
		t.Errorf("ungated run's progress line %q", line)
	}
}

// TestProgressNotOnPipes: when stderr is not a terminal, no live line is
// drawn, and nothing is printed before the first plain line is due.
func TestProgressNotOnPipes(t *testing.T) {
	var buf bytes.Buffer
	r := startReporter(nil, 10, &buf, estimate.Price{})
	r.Stop()
	if r.Live() || buf.Len() > 0 {
		t.Fatalf("startReporter on a buffer drew a progress display (%q), want none", buf.String())
	}
}
