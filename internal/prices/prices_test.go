package prices_test

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/llm"
)

func TestLookup(t *testing.T) {
	gpt4o := llm.Price{Input: 2.50, CachedInput: 1.25, Output: 10.00, BatchDiscount: 0.5}
	haiku := llm.Price{Input: 0.80, CachedInput: 0.08, CacheWrite: 1.00, Output: 4.00, BatchDiscount: 0.5}
	sonnet := llm.Price{Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00, BatchDiscount: 0.5}
	opus45 := llm.Price{Input: 5.00, CachedInput: 0.50, CacheWrite: 6.25, Output: 25.00, BatchDiscount: 0.5}
	for _, tc := range []struct {
		model string
		want  llm.Price
		ok    bool
	}{
		{"gpt-4o", gpt4o, true},
		{"gpt-4o-2024-08-06", gpt4o, true},
		{"gpt-4o-2024-05-13", llm.Price{Input: 5.00, Output: 15.00, BatchDiscount: 0.5}, true}, // its own snapshot price
		{"gpt-4o-mini", llm.Price{Input: 0.15, CachedInput: 0.075, Output: 0.60, BatchDiscount: 0.5}, true},
		{"gpt-5", llm.Price{Input: 1.25, CachedInput: 0.125, Output: 10.00, BatchDiscount: 0.5}, true},
		{"gpt-5-2025-08-07", llm.Price{Input: 1.25, CachedInput: 0.125, Output: 10.00, BatchDiscount: 0.5}, true},
		{"gpt-5-mini", llm.Price{Input: 0.25, CachedInput: 0.025, Output: 2.00, BatchDiscount: 0.5}, true},
		{"gpt-5-nano", llm.Price{Input: 0.05, CachedInput: 0.005, Output: 0.40, BatchDiscount: 0.5}, true},
		{"o3", llm.Price{Input: 2.00, CachedInput: 0.50, Output: 8.00, BatchDiscount: 0.5}, true},
		{"o4-mini-2025-04-16", llm.Price{Input: 1.10, CachedInput: 0.275, Output: 4.40, BatchDiscount: 0.5}, true},
		{"o3-pro", llm.Price{Input: 20.00, Output: 80.00, BatchDiscount: 0.5}, true},
		{"claude-3-5-haiku-20241022", haiku, true},
		{"claude-3-5-haiku-latest", haiku, true},
		{"claude-sonnet-4-5-20250929", sonnet, true},
		{"claude-sonnet-4-20250514", sonnet, true},
		{"claude-opus-4-5-20251101", opus45, true},
		{"claude-opus-4-1-20250805", llm.Price{Input: 15, CachedInput: 1.5, CacheWrite: 18.75, Output: 75, BatchDiscount: 0.5}, true},
		{"claude-haiku-4-5", llm.Price{Input: 1, CachedInput: 0.1, CacheWrite: 1.25, Output: 5, BatchDiscount: 0.5}, true},
		{"claude-3-haiku-20240307", llm.Price{Input: 0.25, CachedInput: 0.025, CacheWrite: 0.3125, Output: 1.25, BatchDiscount: 0.5}, true},
		// Bedrock ids, with and without a cross-region prefix.
		{"anthropic.claude-3-5-haiku-20241022-v1:0", haiku, true},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", sonnet, true},
		{"eu.anthropic.claude-sonnet-4-20250514-v1:0", sonnet, true},
		{"apac.anthropic.claude-3-5-haiku-20241022-v1:0", haiku, true},
		{"global.anthropic.claude-opus-4-5-20251101-v1:0", opus45, true},
		{"meta.llama3-70b-instruct-v1:0", llm.Price{}, false},               // not an Anthropic model on Bedrock
		{"xx.anthropic.claude-3-5-haiku-20241022-v1:0", llm.Price{}, false}, // not a region prefix
		{"gpt-4o-audio-preview", llm.Price{}, false},                        // not a version of gpt-4o: unknown, not guessed
		{"sim", llm.Price{}, false},
		{"", llm.Price{}, false},
	} {
		got, ok := prices.Lookup(tc.model)
		if ok != tc.ok || !near(got, tc.want) {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
}

// near reports whether a and b are equal up to float rounding (the cache
// prices are computed as multiples of the input price).
func near(a, b llm.Price) bool {
	eq := func(x, y float64) bool { return x-y < 1e-12 && y-x < 1e-12 }
	return eq(a.Input, b.Input) && eq(a.CachedInput, b.CachedInput) && eq(a.CacheWrite, b.CacheWrite) &&
		eq(a.Output, b.Output) && eq(a.BatchDiscount, b.BatchDiscount)
}

func TestDated(t *testing.T) {
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(prices.Dated) {
		t.Errorf("Dated = %q, want YYYY-MM-DD", prices.Dated)
	}
}

// TestAnthropicCacheCost checks an Anthropic answer that wrote to and read
// from the cache is counted at the write and read prices.
func TestAnthropicCacheCost(t *testing.T) {
	p, _ := prices.Lookup("claude-sonnet-4-5")
	// 1M prompt tokens: 200k read from the cache, 400k written to it,
	// 400k plain; 100k completion tokens.
	u := llm.Usage{PromptTokens: 1_000_000, CachedTokens: 200_000, CacheWriteTokens: 400_000, CompletionTokens: 100_000}
	want := 0.4*3.00 + 0.2*0.30 + 0.4*3.75 + 0.1*15.00
	if got := p.Cost(u); got-want > 1e-9 || want-got > 1e-9 {
		t.Errorf("Cost = %v, want %v", got, want)
	}
}

func TestWarnOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	const model = "test-unknown-model-warn-once"
	if !prices.Warn(log, model, "the job's pricing") {
		t.Fatal("first Warn did not log")
	}
	if prices.Warn(log, model, "the job's pricing") {
		t.Error("second Warn logged again")
	}
	if n := strings.Count(buf.String(), model); n != 1 {
		t.Errorf("log names the model %d times, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "no known price") {
		t.Errorf("log does not say the price is unknown:\n%s", buf.String())
	}
}
