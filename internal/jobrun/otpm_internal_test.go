package jobrun

import (
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
)

// TestSummaryShowsOutputTokenLimit: an output-token limit in force
// (configured, or reported by the backend) is named on the throttled line;
// a run without one keeps the line as before.
func TestSummaryShowsOutputTokenLimit(t *testing.T) {
	var b strings.Builder
	st := batchagent.Stats{Done: 3, OK: 3}
	st.RateLimits = batchagent.RateLimit{RPM: 4000, TPM: 2_000_000, OTPM: 400_000}
	writeSummary(&b, summary{name: "job", st: st, wall: time.Second, written: 3, outPath: "out.jsonl", limitSource: "test"})
	if !strings.Contains(b.String(), "rate limits 4000 rpm, 2000000 tpm · 400000 output tokens a minute") {
		t.Errorf("summary lacks the output-token limit:\n%s", b.String())
	}
	b.Reset()
	st.RateLimits.OTPM = 0
	writeSummary(&b, summary{name: "job", st: st, wall: time.Second, written: 3, outPath: "out.jsonl", limitSource: "test"})
	if s := b.String(); strings.Contains(s, "output tokens a minute") || !strings.Contains(s, "rate limits 4000 rpm, 2000000 tpm") {
		t.Errorf("summary without an output-token limit:\n%s", s)
	}
}
