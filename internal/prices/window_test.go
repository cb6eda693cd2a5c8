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
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", 200000, true},
		{"gpt-5-mini", 400000, true},
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
	for _, m := range []string{"gpt-5", "gpt-5-chat", "gpt-5-mini", "gpt-5-nano", "gpt-5-pro",
		"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano",
		"o1", "o1-mini", "o1-pro", "o3", "o3-mini", "o3-pro", "o4-mini", "gpt-4-turbo", "gpt-3.5-turbo",
		"claude-opus-4-5", "claude-opus-4-1", "claude-opus-4", "claude-opus-4-0", "claude-sonnet-4-5",
		"claude-sonnet-4", "claude-sonnet-4-0", "claude-3-7-sonnet", "claude-3-5-sonnet", "claude-haiku-4-5",
		"claude-3-5-haiku", "claude-3-haiku", "claude-3-opus"} {
		_, priced := prices.Lookup(m)
		_, windowed := prices.ContextWindow(m)
		if priced != windowed {
			t.Errorf("%s: priced %v, window known %v; want both", m, priced, windowed)
		}
	}
}
