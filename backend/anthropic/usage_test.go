package anthropic

import (
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// TestUsageOf checks the cache's read and write counts are kept apart:
// writes are billed above the input price.
func TestUsageOf(t *testing.T) {
	got := usageOf(100, 40, 25, 7)
	want := llm.Usage{PromptTokens: 165, CompletionTokens: 7, CachedTokens: 40, CacheWriteTokens: 25}
	if got != want {
		t.Errorf("usageOf = %+v, want %+v", got, want)
	}
}
