package llm_test

import (
	"testing"

	"github.com/batchagent/batchagent/llm"
)

func TestPriceCost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		price llm.Price
		usage llm.Usage
		want  float64
	}{
		{"zero usage", llm.Price{Input: 2.5, Output: 10}, llm.Usage{}, 0},
		{"uncached", llm.Price{Input: 2.5, Output: 10}, llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000}, 2.5 + 5},
		{"cached at its own price", llm.Price{Input: 2, CachedInput: 0.5, Output: 8},
			llm.Usage{PromptTokens: 400_000, CachedTokens: 100_000, CompletionTokens: 250_000}, 2.65},
		{"cached falls back to input", llm.Price{Input: 2, Output: 8},
			llm.Usage{PromptTokens: 400_000, CachedTokens: 100_000, CompletionTokens: 250_000}, 2.8},
		{"cache writes at their own price", llm.Price{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15},
			llm.Usage{PromptTokens: 1_000_000, CachedTokens: 200_000, CacheWriteTokens: 400_000}, 0.4*3 + 0.2*0.3 + 0.4*3.75},
		{"cache writes fall back to input", llm.Price{Input: 3, Output: 15},
			llm.Usage{PromptTokens: 1_000_000, CacheWriteTokens: 400_000}, 3},
		{"batch discount not applied", llm.Price{Input: 1, Output: 1, BatchDiscount: 0.5}, llm.Usage{PromptTokens: 1_000_000}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.price.Cost(tc.usage); got != tc.want {
				t.Errorf("Cost(%+v) = %v, want %v", tc.usage, got, tc.want)
			}
		})
	}
}
