package estimate

import (
	"fmt"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/llm"
)

// Price is the price a job's cost is reported at: the job file's pricing,
// else the built-in table's entry for its model, else none. The zero
// Price is an unknown price for an unnamed model.
type Price struct {
	Price  llm.Price // per million tokens; zero when not Known
	Known  bool
	Source string // where a known price comes from: "file", "table dated D"
	Model  string // the job's model name, for the unknown case
	// Batch: the job's calls go through the provider's batch API; Price
	// is then the batch price (BatchDiscount already taken off, and kept
	// to say how much), where the provider has one.
	Batch bool
	// Realtime is the price of the same tokens in real time, where Batch
	// changed Price; else Price.
	Realtime llm.Price
}

// PriceOf returns the price of cj's model, as its calls are delivered
// through the job file's backend (see PriceFor).
func PriceOf(cj *config.Job) Price { return PriceFor(cj, cj.Backend) }

// PriceFor returns the price of cj's model with its calls sent to the
// backend URL backend: the batch price when the job's delivery is batch
// (the delivery key, or the URL's ?mode=batch) and the price has a batch
// discount (the built-in table's; a file's pricing is taken as it is).
func PriceFor(cj *config.Job, backend string) Price {
	jp := Price{Model: cj.Def.ModelName, Batch: cj.BatchDelivery(backend)}
	switch p, ok := prices.Lookup(cj.Def.ModelName); {
	case cj.Pricing != nil:
		jp.Price, jp.Known, jp.Source = *cj.Pricing, true, "file"
	case ok:
		jp.Price, jp.Known, jp.Source = p, true, "table dated "+prices.Dated
	}
	jp.Realtime = jp.Price
	if d := jp.Price.BatchDiscount; jp.Batch && jp.Known && d > 0 {
		jp.Price = Discounted(jp.Price)
		jp.Source += fmt.Sprintf(", batch API: %g%% off", d*100)
	}
	return jp
}

// Discounted returns p at its batch price: every price with
// BatchDiscount taken off (BatchDiscount kept, to say how much).
func Discounted(p llm.Price) llm.Price {
	f := 1 - p.BatchDiscount
	p.Input *= f
	p.CachedInput *= f
	p.CacheWrite *= f
	p.Output *= f
	return p
}

// ResultCost is the cost of a result's usage, for its output line; false
// when the price is unknown.
func (p Price) ResultCost(r batchagent.Result) (float64, bool) {
	if !p.Known {
		return 0, false
	}
	return p.Price.Cost(r.Usage), true
}

// Progress is the progress line's cost: the cost so far and, once it can
// be projected ([Price.Projection]), the projected total; "" when the
// price is unknown.
func (p Price) Progress(st batchagent.Stats, total int) string {
	spent, projected, ok := p.Projection(st, total)
	switch {
	case !p.Known:
		return ""
	case !ok:
		return fmt.Sprintf(" · $%.4f so far", spent)
	}
	return fmt.Sprintf(" · $%.4f so far · ~$%.4f projected", spent, projected)
}

// Projection returns the cost of the run's tokens so far, and its
// projected total: the cost so far ÷ the results the run has delivered
// × the inputs it runs, results read from the state file left out of
// both (they cost nothing now). ok is false while no result is done, when
// total (the inputs) is unknown (0) or the price is.
func (p Price) Projection(st batchagent.Stats, total int) (spent, projected float64, ok bool) {
	if !p.Known {
		return 0, 0, false
	}
	spent = p.Price.Cost(st.Usage)
	ran, toRun := st.Done-st.Restored, int64(total)-st.Restored
	if ran <= 0 || toRun <= 0 || total <= 0 {
		return spent, 0, false
	}
	return spent, spent / float64(ran) * float64(max(toRun, ran)), true
}

// Summary is the summary's cost line for the tokens of u.
func (p Price) Summary(u llm.Usage) string {
	if !p.Known {
		model := p.Model
		if model == "" {
			model = `""`
		}
		return fmt.Sprintf("cost: unknown (no price for model %s)", model)
	}
	return fmt.Sprintf("cost: $%.4f (prices: %s)", p.Price.Cost(u), p.Source)
}
