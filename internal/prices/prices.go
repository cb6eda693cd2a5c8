// Package prices holds an embedded table of what well-known models' tokens
// cost, so `batchagent run` can report a job's cost when its file sets no
// pricing. The table is dated: providers change prices, and a price not in
// the table is unknown, never guessed ([Warn] says so once per model). A
// second table, as dated, holds their context windows ([ContextWindow]).
//
// A model is found by its name as the provider's API takes it: OpenAI's
// ("gpt-5", "gpt-4o-2024-08-06"), Anthropic's ("claude-sonnet-4-5",
// "claude-sonnet-4-5-20250929", "claude-3-7-sonnet-latest") and Bedrock's
// ("anthropic.claude-3-5-haiku-20241022-v1:0", with a cross-region
// inference prefix "us.", "eu.", "apac.", "global." and the like).
package prices

import (
	"log/slog"
	"regexp"
	"sync"

	"github.com/batchagent/batchagent/llm"
)

// Dated is the day the table's prices were taken from the providers'
// published pricing pages, as YYYY-MM-DD.
const Dated = "2026-11-29"

// Anthropic's prompt-caching multipliers: a 5-minute cache write costs
// 1.25× the input price, a cache read 0.1× it.
const (
	anthropicWrite = 1.25
	anthropicRead  = 0.1
)

// anthropic returns the price of an Anthropic model of input and output
// prices, with its cache and Message Batches prices.
func anthropic(input, output float64) llm.Price {
	return llm.Price{Input: input, CachedInput: input * anthropicRead, CacheWrite: input * anthropicWrite, Output: output, BatchDiscount: 0.5}
}

// openai returns the price of an OpenAI model: cached input is the
// prompt-caching price (zero: the model has none, so Input); the Batch API
// halves every price.
func openai(input, cached, output float64) llm.Price {
	return llm.Price{Input: input, CachedInput: cached, Output: output, BatchDiscount: 0.5}
}

// table maps model names to prices in US dollars per million tokens.
//
// Prices as published by the providers, and as last known when [Dated]
// was set: to be re-checked against https://openai.com/api/pricing,
// https://www.anthropic.com/pricing and https://aws.amazon.com/bedrock/pricing
// whenever the table is touched (change Dated with them). Bedrock bills
// Anthropic's models at Anthropic's prices (its regional endpoints of the
// 4.5 models cost about 10% more than global ones: this table holds the
// global price), and halves them for batch inference.
var table = map[string]llm.Price{
	// OpenAI.
	"gpt-5":        openai(1.25, 0.125, 10.00),
	"gpt-5-chat":   openai(1.25, 0.125, 10.00), // gpt-5-chat-latest
	"gpt-5-mini":   openai(0.25, 0.025, 2.00),
	"gpt-5-nano":   openai(0.05, 0.005, 0.40),
	"gpt-5-pro":    openai(15.00, 0, 120.00),
	"gpt-4.1":      openai(2.00, 0.50, 8.00),
	"gpt-4.1-mini": openai(0.40, 0.10, 1.60),
	"gpt-4.1-nano": openai(0.10, 0.025, 0.40),
	"gpt-4o":       openai(2.50, 1.25, 10.00),
	"gpt-4o-mini":  openai(0.15, 0.075, 0.60),
	// The first gpt-4o snapshot kept its launch price.
	"gpt-4o-2024-05-13": openai(5.00, 0, 15.00),
	"o1":                openai(15.00, 7.50, 60.00),
	"o1-mini":           openai(1.10, 0.55, 4.40),
	"o1-pro":            openai(150.00, 0, 600.00),
	"o3":                openai(2.00, 0.50, 8.00),
	"o3-mini":           openai(1.10, 0.55, 4.40),
	"o3-pro":            openai(20.00, 0, 80.00),
	"o4-mini":           openai(1.10, 0.275, 4.40),
	"gpt-4-turbo":       openai(10.00, 0, 30.00),
	"gpt-3.5-turbo":     openai(0.50, 0, 1.50),

	// Anthropic (and Bedrock's names of the same models).
	"claude-opus-4-5":   anthropic(5.00, 25.00),
	"claude-opus-4-1":   anthropic(15.00, 75.00),
	"claude-opus-4":     anthropic(15.00, 75.00),
	"claude-opus-4-0":   anthropic(15.00, 75.00),
	"claude-sonnet-4-5": anthropic(3.00, 15.00),
	"claude-sonnet-4":   anthropic(3.00, 15.00),
	"claude-sonnet-4-0": anthropic(3.00, 15.00),
	"claude-3-7-sonnet": anthropic(3.00, 15.00),
	"claude-3-5-sonnet": anthropic(3.00, 15.00),
	"claude-haiku-4-5":  anthropic(1.00, 5.00),
	"claude-3-5-haiku":  anthropic(0.80, 4.00),
	"claude-3-haiku":    anthropic(0.25, 1.25),
	"claude-3-opus":     anthropic(15.00, 75.00),
}

var (
	// version matches the suffix naming one version of a model: a date
	// ("-2024-08-06", "-20250514") or "-latest".
	version = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)
	// bedrock matches a Bedrock model id of an Anthropic model: an
	// optional cross-region inference prefix, the provider, the model and
	// its version suffix ("-v1:0", "-v2").
	bedrock = regexp.MustCompile(`^(?:(?:us|us-gov|eu|apac|jp|au|ca|global)\.)?anthropic\.(.+?)-v\d+(?::\d+)?$`)
)

// base returns the table's name of model: without a Bedrock prefix and
// version, and without a version suffix.
func base(model string) string {
	if m := bedrock.FindStringSubmatch(model); m != nil {
		model = m[1]
	}
	return version.ReplaceAllString(model, "")
}

// Lookup returns the price of model, in US dollars per million tokens, as
// of [Dated]. A model named with a version suffix ("gpt-4o-2024-08-06",
// "claude-3-5-haiku-20241022", "claude-3-7-sonnet-latest") or by its
// Bedrock id ("us.anthropic.claude-sonnet-4-20250514-v1:0") has the price
// of the plain name. It reports false for a model not in the table.
func Lookup(model string) (llm.Price, bool) {
	if p, ok := table[model]; ok {
		return p, true
	}
	p, ok := table[base(model)]
	return p, ok
}

// warned holds the models [Warn] has warned of.
var warned sync.Map // model name → struct{}

// Warn logs to log, once per model per process, that model has no known
// price, so its cost is not counted; later calls for the same model log
// nothing. It reports whether it logged. A nil log logs nothing but still
// counts the warning as given.
func Warn(log *slog.Logger, model, where string) bool {
	if _, seen := warned.LoadOrStore(model, struct{}{}); seen {
		return false
	}
	if log != nil {
		log.Warn("no known price for model: its cost is not counted (set one in "+where+")",
			slog.String("model", model), slog.String("prices_dated", Dated))
	}
	return true
}
