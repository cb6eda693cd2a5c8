package prices_test

import (
	"regexp"
	"testing"

	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/llm"
)

func TestLookup(t *testing.T) {
	gpt4o := llm.Price{Input: 2.50, CachedInput: 1.25, Output: 10.00, BatchDiscount: 0.5}
	haiku := llm.Price{Input: 0.80, CachedInput: 0.08, Output: 4.00, BatchDiscount: 0.5}
	for _, tc := range []struct {
		model string
		want  llm.Price
		ok    bool
	}{
		{"gpt-4o", gpt4o, true},
		{"gpt-4o-2024-08-06", gpt4o, true},
		{"gpt-4o-mini", llm.Price{Input: 0.15, CachedInput: 0.075, Output: 0.60, BatchDiscount: 0.5}, true},
		{"claude-3-5-haiku-20241022", haiku, true},
		{"claude-3-5-haiku-latest", haiku, true},
		{"gpt-4o-audio-preview", llm.Price{}, false}, // not a version of gpt-4o: unknown, not guessed
		{"sim", llm.Price{}, false},
		{"", llm.Price{}, false},
	} {
		got, ok := prices.Lookup(tc.model)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDated(t *testing.T) {
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(prices.Dated) {
		t.Errorf("Dated = %q, want YYYY-MM-DD", prices.Dated)
	}
}
