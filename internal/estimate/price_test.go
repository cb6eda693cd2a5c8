package estimate_test

import (
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
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
			p := estimate.PriceOf(cj)
			if got := p.Summary(u); got != tc.want {
				t.Errorf("Summary = %q, want %q", got, tc.want)
			}
			c, ok := p.ResultCost(batchagent.Result{Usage: u})
			switch {
			case tc.pricing != nil && (!ok || c != 4):
				t.Errorf("ResultCost = %v, %v; want 4, true", c, ok)
			case tc.pricing == nil && tc.model == "gpt-4o-2024-08-06" && (!ok || c != table.Cost(u)):
				t.Errorf("ResultCost = %v, %v; want %v, true", c, ok, table.Cost(u))
			case strings.Contains(tc.want, "unknown") && ok:
				t.Errorf("ResultCost = %v, true; want none", c)
			}
		})
	}
}

// TestProgress: the progress line's cost is the cost so far and the
// projected total: the cost so far per result run times the inputs to
// run.
func TestProgress(t *testing.T) {
	p := estimate.Price{Price: llm.Price{Input: 1, Output: 2}, Known: true, Source: "file"}
	st := batchagent.Stats{Started: 2, Done: 1, OK: 1, Usage: llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000}}
	for _, tc := range []struct {
		name  string
		p     estimate.Price
		st    batchagent.Stats
		total int
		want  string
	}{
		{"no price", estimate.Price{}, st, 10, ""},
		{"projected", p, st, 10, " · $2.0000 so far · ~$20.0000 projected"},
		{"total unknown", p, st, 0, " · $2.0000 so far"},
		{"none done", p, batchagent.Stats{Started: 3}, 10, " · $0.0000 so far"},
		// 4 restored cost nothing now: $2 for 2 run, 6 to run.
		{"resumed", p, batchagent.Stats{Done: 6, Restored: 4, Usage: st.Usage}, 10, " · $2.0000 so far · ~$6.0000 projected"},
		{"all done", p, batchagent.Stats{Done: 10, Usage: st.Usage}, 10, " · $2.0000 so far · ~$2.0000 projected"},
	} {
		if got := tc.p.Progress(tc.st, tc.total); got != tc.want {
			t.Errorf("%s: Progress(%+v, %d) = %q, want %q", tc.name, tc.st, tc.total, got, tc.want)
		}
	}
}
