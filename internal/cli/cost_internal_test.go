package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/llm"
)

// TestPriceOf: the file's pricing wins over the table, the table answers
// for a known model, and any other model has no price.
func TestPriceOf(t *testing.T) {
	filePrice := &llm.Price{Input: 1, Output: 2}
	table, _ := prices.Lookup("gpt-4o")
	u := llm.Usage{PromptTokens: 2_000_000, CompletionTokens: 1_000_000}
	for _, tc := range []struct {
		name    string
		model   string
		pricing *llm.Price
		want    string
	}{
		{"file over table", "gpt-4o", filePrice, "cost: $4.0000 (prices: file)"},
		{"table", "gpt-4o-2024-08-06", nil, "cost: $15.0000 (prices: table dated " + prices.Dated + ")"},
		{"unknown", "my-model", nil, "cost: unknown (no price for model my-model)"},
		{"no model", "", nil, `cost: unknown (no price for model "")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := &config.Job{Pricing: tc.pricing}
			cj.Def.ModelName = tc.model
			p := priceOf(cj)
			if got := p.summary(u); got != tc.want {
				t.Errorf("summary = %q, want %q", got, tc.want)
			}
			c, ok := p.resultCost(batchagent.Result{Usage: u})
			switch {
			case tc.pricing != nil && (!ok || c != 4):
				t.Errorf("resultCost = %v, %v; want 4, true", c, ok)
			case tc.pricing == nil && tc.model == "gpt-4o-2024-08-06" && (!ok || c != table.Cost(u)):
				t.Errorf("resultCost = %v, %v; want %v, true", c, ok, table.Cost(u))
			case strings.Contains(tc.want, "unknown") && ok:
				t.Errorf("resultCost = %v, true; want none", c)
			}
		})
	}
}

// TestProgressShowsCost: the progress line ends with the cost so far.
func TestProgressShowsCost(t *testing.T) {
	p := jobPrice{price: llm.Price{Input: 1, Output: 2}, known: true, source: "file"}
	st := batchagent.Stats{Started: 2, Done: 1, OK: 1, Usage: llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000}}
	var out syncBuffer
	refresh := make(chan any)
	r := newReporter(func() batchagent.Stats { return st }, 10, &out, 200, refresh, p.progress)
	refresh <- time.Now()
	r.stop()
	if text := ansi.ReplaceAllString(out.String(), ""); !strings.Contains(text, "· $2.0000") {
		t.Errorf("progress lacks the cost so far ($2.0000):\n%s", text)
	}
	if got := (jobPrice{}).progress(st); got != "" {
		t.Errorf("progress with no price = %q, want nothing", got)
	}
}
