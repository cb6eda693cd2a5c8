package jobrun

import (
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/respcache"
)

func TestCacheLine(t *testing.T) {
	st := respcache.Stats{Hits: 400, Saved: llm.Usage{PromptTokens: 90_000, CompletionTokens: 10_000}}
	price := llm.Price{Input: 1, Output: 4}
	known := func(u llm.Usage) (float64, bool) { return price.Cost(u), true }
	if got, want := cacheLine(st, known), "400 calls answered from the cache, 100.0k tokens and $0.1300 saved"; got != want {
		t.Errorf("cacheLine = %q, want %q", got, want)
	}
	unknown := func(llm.Usage) (float64, bool) { return 0, false }
	st.Errors = 2
	if got := cacheLine(st, unknown); strings.Contains(got, "$") || !strings.Contains(got, "2 cache reads or writes failed") {
		t.Errorf("cacheLine at an unknown price with errors = %q", got)
	}
}
