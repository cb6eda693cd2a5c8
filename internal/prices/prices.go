// Package prices holds an embedded table of what well-known models' tokens
// cost, so `batchagent run` can report a job's cost when its file sets no
// pricing. The table is dated: providers change prices, and a price not in
// the table is unknown, never guessed. A second table, as dated, holds
// their context windows ([ContextWindow]).
package prices

import (
	"regexp"

	"github.com/batchagent/batchagent/llm"
)

// Dated is the day the table's prices were taken from the providers'
// published pricing pages, as YYYY-MM-DD.
const Dated = "2025-06-01"

// table maps model names to prices in US dollars per million tokens.
//
// Prices as published on 2025-06-01 (to be checked against
// https://openai.com/api/pricing and https://www.anthropic.com/pricing
// when updated; change Dated with them).
var table = map[string]llm.Price{
	// OpenAI: cached input is the prompt-caching price; the Batch API
	// halves every price.
	"gpt-4o":       {Input: 2.50, CachedInput: 1.25, Output: 10.00, BatchDiscount: 0.5},
	"gpt-4o-mini":  {Input: 0.15, CachedInput: 0.075, Output: 0.60, BatchDiscount: 0.5},
	"gpt-4.1":      {Input: 2.00, CachedInput: 0.50, Output: 8.00, BatchDiscount: 0.5},
	"gpt-4.1-mini": {Input: 0.40, CachedInput: 0.10, Output: 1.60, BatchDiscount: 0.5},
	"gpt-4.1-nano": {Input: 0.10, CachedInput: 0.025, Output: 0.40, BatchDiscount: 0.5},
	// Anthropic: cached input is the cache-read price (cache writes,
	// which cost more than Input, are not counted apart); the Message
	// Batches API halves every price.
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, Output: 4.00, BatchDiscount: 0.5},
	"claude-3-7-sonnet": {Input: 3.00, CachedInput: 0.30, Output: 15.00, BatchDiscount: 0.5},
	"claude-sonnet-4":   {Input: 3.00, CachedInput: 0.30, Output: 15.00, BatchDiscount: 0.5},
	"claude-opus-4":     {Input: 15.00, CachedInput: 1.50, Output: 75.00, BatchDiscount: 0.5},
}

// version matches the suffix naming one version of a model: a date
// ("-2024-08-06", "-20250514") or "-latest".
var version = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Lookup returns the price of model, in US dollars per million tokens, as
// of [Dated]. A model named with a version suffix ("gpt-4o-2024-08-06",
// "claude-3-5-haiku-20241022", "claude-3-7-sonnet-latest") has the price
// of the name without it. It reports false for a model not in the table.
func Lookup(model string) (llm.Price, bool) {
	if p, ok := table[model]; ok {
		return p, true
	}
	p, ok := table[version.ReplaceAllString(model, "")]
	return p, ok
}
