package cli

import (
	"fmt"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/llm"
)

// jobPrice is the price a run's cost is reported at: the job file's
// pricing, else the built-in table's entry for its model, else none.
type jobPrice struct {
	price  llm.Price
	known  bool
	source string // where a known price comes from: "file", "table dated D"
	model  string // the job's model name, for the unknown case
}

// priceOf returns the price of cj's model.
func priceOf(cj *config.Job) jobPrice {
	jp := jobPrice{model: cj.Def.ModelName}
	switch p, ok := prices.Lookup(cj.Def.ModelName); {
	case cj.Pricing != nil:
		jp.price, jp.known, jp.source = *cj.Pricing, true, "file"
	case ok:
		jp.price, jp.known, jp.source = p, true, "table dated "+prices.Dated
	}
	return jp
}

// resultCost is the cost of a result's usage, for its output line.
func (p jobPrice) resultCost(r batchagent.Result) (float64, bool) {
	if !p.known {
		return 0, false
	}
	return p.price.Cost(r.Usage), true
}

// progress is the progress line's cost: the cost so far and, once it can
// be projected (projection), the projected total; "" when the price is
// unknown.
func (p jobPrice) progress(st batchagent.Stats, total int) string {
	spent, projected, ok := p.projection(st, total)
	switch {
	case !p.known:
		return ""
	case !ok:
		return fmt.Sprintf(" · $%.4f so far", spent)
	}
	return fmt.Sprintf(" · $%.4f so far · ~$%.4f projected", spent, projected)
}

// projection returns the cost of the run's tokens so far, and its
// projected total: the cost so far ÷ the results the run has delivered
// × the inputs it runs, results read from the state file left out of
// both (they cost nothing now). ok is false while no result is done, when
// total (the inputs) is unknown (0) or the price is.
func (p jobPrice) projection(st batchagent.Stats, total int) (spent, projected float64, ok bool) {
	if !p.known {
		return 0, 0, false
	}
	spent = p.price.Cost(st.Usage)
	ran, toRun := st.Done-st.Restored, int64(total)-st.Restored
	if ran <= 0 || toRun <= 0 || total <= 0 {
		return spent, 0, false
	}
	return spent, spent / float64(ran) * float64(max(toRun, ran)), true
}

// summary is the summary's cost line for the tokens of u.
func (p jobPrice) summary(u llm.Usage) string {
	if !p.known {
		model := p.model
		if model == "" {
			model = `""`
		}
		return fmt.Sprintf("cost: unknown (no price for model %s)", model)
	}
	return fmt.Sprintf("cost: $%.4f (prices: %s)", p.price.Cost(u), p.source)
}
