package prices_test

import (
	"testing"

	"github.com/batchagent/batchagent/internal/prices"
)

func TestContextWindow(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  int
		ok    bool
	}{
		{"gpt-4o", 128000, true},
		{"gpt-4o-2024-08-06", 128000, true},
		{"gpt-4.1-mini", 1047576, true},
		{"claude-sonnet-4-20250514", 200000, true},
		{"gpt-4o-audio-preview", 0, false},
		{"sim", 0, false},
		{"", 0, false},
	} {
		got, ok := prices.ContextWindow(tc.model)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ContextWindow(%q) = %d, %v; want %d, %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
}

// TestContextWindowPriced checks that every model with a price has a known
// window: the two tables name the same models.
func TestContextWindowPriced(t *testing.T) {
	for _, m := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano",
		"claude-3-5-haiku", "claude-3-7-sonnet", "claude-sonnet-4", "claude-opus-4"} {
		_, priced := prices.Lookup(m)
		_, windowed := prices.ContextWindow(m)
		if priced != windowed {
			t.Errorf("%s: priced %v, window known %v; want both", m, priced, windowed)
		}
	}
}
