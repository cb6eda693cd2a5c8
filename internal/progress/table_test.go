package progress

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mattn/go-runewidth"
)

// TestTable: a summary's labels line up on their colons, and at 60
// columns a long value wraps at a word boundary, indented to its column,
// no line wider than 60 and no word cut; with no width nothing wraps.
func TestTable(t *testing.T) {
	var tb Table
	tb.Add("agents", "ok %d · failed %d", 20, 0)
	tb.Add("tool errors", "20 of 20 tool calls failed (lookup_weather 12, fetch_page 8); see batchagent status --agent N")
	tb.Add("concurrency", "adaptive, start 16 (max 16: openai+http default; limits.max_inflight sets it)")
	tb.Add("a label longer than the column", "x")
	var b strings.Builder
	if err := tb.Write(&b, "batchagent: review-tickets: 20 results in 1.234s (100 restored from the state file; 0 run, 0.0 agents/s)", 60); err != nil {
		t.Fatal(err)
	}
	want := `batchagent: review-tickets: 20 results in 1.234s (100
  restored from the state file; 0 run, 0.0 agents/s)
       agents: ok 20 · failed 0
  tool errors: 20 of 20 tool calls failed (lookup_weather
               12, fetch_page 8); see batchagent status
               --agent N
  concurrency: adaptive, start 16 (max 16: openai+http
               default; limits.max_inflight sets it)
  a label longer than the column: x
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Table at 60 columns (-want +got):\n%s", diff)
	}
	for l := range strings.SplitSeq(b.String(), "\n") {
		if runewidth.StringWidth(l) > 60 {
			t.Errorf("line wider than 60: %q", l)
		}
	}
	b.Reset()
	if err := tb.Write(&b, "heading", 0); err != nil {
		t.Fatal(err)
	}
	if want := "  concurrency: adaptive, start 16 (max 16: openai+http default; limits.max_inflight sets it)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("Table with no width wraps:\n%s", b.String())
	}
}
