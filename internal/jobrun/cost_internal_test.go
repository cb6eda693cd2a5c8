package jobrun

import (
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/llm"
)

// TestProgressShowsCost: the progress line shows the cost so far and
// the projected total (estimate.Price.Projection; its cases are tested
// there) after the failed ones.
func TestProgressShowsCost(t *testing.T) {
	p := estimate.Price{Price: llm.Price{Input: 1, Output: 2}, Known: true, Source: "file"}
	st := batchagent.Stats{Started: 2, Done: 1, OK: 1, Usage: llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000}}
	if line := runCounters(st, 10, p).Line(time.Second); !strings.Contains(line, "· failed 0 · $2.0000 so far · ~$20.0000 projected · agents 1") {
		t.Errorf("progress lacks the cost so far ($2.0000) and the projection ($20.0000):\n%s", line)
	}
}
