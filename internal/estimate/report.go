package estimate

import (
	"slices"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
)

// Span is an estimated count: a point estimate and its range.
type Span struct {
	Estimate int64 `json:"estimate"`
	Low      int64 `json:"low"`
	High     int64 `json:"high"`
}

// CostSpan is an estimated cost, in the price's currency (US dollars for
// the built-in table).
type CostSpan struct {
	Estimate float64 `json:"estimate"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
}

// Spread is the smallest, median and largest of per-input counts.
type Spread struct {
	Min    int64 `json:"min"`
	Median int64 `json:"median"`
	Max    int64 `json:"max"`
}

// Report is a dry run's estimate; run --dry-run --json writes it as one
// object.
type Report struct {
	// Job is the job's name; Inputs the input file.
	Job    string `json:"job"`
	Inputs string `json:"inputs"`
	// InputsOK and InputsBad count the inputs; the estimate covers the
	// OK ones.
	InputsOK  int `json:"inputs_ok"`
	InputsBad int `json:"inputs_bad"`
	// Method is "schema" (answers estimated from the output schema, no
	// model call) or "sample" (Sampled inputs run for real).
	Method  string `json:"method"`
	Sampled int    `json:"sampled,omitempty"`
	// Tokenizer names what counted the tokens: the simulator's own count
	// on sim:// and sim+http://, else a tiktoken vocabulary (the model's
	// own, or o200k_base standing in for an unknown model's).
	Tokenizer string `json:"tokenizer"`
	// SharedPrefixTokens is the tokens every call sends first (system
	// prompt, schema instructions, tool definitions); TaskTokens the
	// tokens of each input's own task in its first request.
	SharedPrefixTokens int    `json:"shared_prefix_tokens"`
	TaskTokens         Spread `json:"task_tokens"`
	// AnswerTokens (schema method) is the tokens of an agent's final
	// answer: the schema's short and long answer.
	AnswerTokens *Span `json:"answer_tokens,omitempty"`
	// CallsPerAgent is the model calls of one agent.
	CallsPerAgent Span `json:"calls_per_agent"`
	// Calls, PromptTokens, SharedPrefix (the part of PromptTokens that is
	// the shared prefix; schema method), CachedTokens (sample method) and
	// CompletionTokens are the whole run's.
	Calls        Span  `json:"calls"`
	PromptTokens Span  `json:"prompt_tokens"`
	SharedPrefix *Span `json:"shared_prefix_prompt_tokens,omitempty"`
	// MediaTokens is the part of PromptTokens that is the inputs' media
	// (images, audio, documents) as the backend bills them; absent for a
	// text-only job.
	MediaTokens      *Span `json:"media_tokens,omitempty"`
	CachedTokens     *Span `json:"cached_tokens,omitempty"`
	CompletionTokens Span  `json:"completion_tokens"`
	// Model is the job's model; Price its price per million tokens and
	// PriceSource where that comes from ("file", "table dated D"); both
	// absent when no price is known, and Cost then too.
	Model string `json:"model"`
	// Delivery is how the job's calls reach the backend: "realtime", or
	// "batch" through the provider's batch API (Price and Cost are then
	// at the batch price).
	Delivery    string    `json:"delivery"`
	Price       *Rate     `json:"price,omitempty"`
	PriceSource string    `json:"price_source,omitempty"`
	Cost        *CostSpan `json:"cost,omitempty"`
	// SampleCost is what the sampled inputs cost (sample method, known
	// price).
	SampleCost *float64 `json:"sample_cost,omitempty"`

	// What the table says besides, not in the JSON: the summary's line
	// when no price is known, the job's max_turns, whether it has tools
	// and packs, and pack.max_agents.
	UnknownPrice string `json:"-"`
	// RealtimePrice is the price of the same tokens in real time, for a
	// job delivered through the provider's batch API at a batch price
	// (Price is then the batch price); nil otherwise.
	RealtimePrice *Rate `json:"realtime_price,omitempty"`
	MaxTurns      int   `json:"-"`
	Tools, Pack   bool  `json:"-"`
	PackSize      int   `json:"-"`
	// PackAuto: the engine chooses whether and how much to pack as the
	// run measures (job.Pack.Auto); PackVerify is the share of packed
	// answers it checks against alone runs (job.Pack.Verify).
	PackAuto   bool    `json:"-"`
	PackVerify float64 `json:"-"`
}

// Rate is a price per million tokens, as a [Report] holds it.
type Rate struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
	// BatchDiscount is the share the provider takes off for calls made
	// through its own batch API (the built-in table's; 0: none known).
	BatchDiscount float64 `json:"batch_discount,omitempty"`
}

// cost is the cost of u at p.
func (p Rate) cost(u llm.Usage) float64 {
	return llm.Price{Input: p.Input, CachedInput: p.CachedInput, Output: p.Output}.Cost(u)
}

// FromSample replaces the estimate with one scaled from the sampled
// agents' measured calls, tokens and cost at price: all the valid inputs
// at the sample's median per agent, low and high at its smallest and
// largest.
func (rep *Report) FromSample(results []batchagent.Result, price Price) {
	rep.Method, rep.Sampled = "sample", len(results)
	rep.AnswerTokens, rep.SharedPrefix = nil, nil
	if len(results) == 0 {
		return
	}
	n := int64(rep.InputsOK)
	scaled := func(per func(batchagent.Result) int64) Span {
		vs := make([]int64, len(results))
		for i, r := range results {
			vs[i] = per(r)
		}
		slices.Sort(vs)
		return Span{Estimate: n * vs[(len(vs)-1)/2], Low: n * vs[0], High: n * vs[len(vs)-1]}
	}
	calls := func(r batchagent.Result) int64 { return int64(r.ModelCalls) }
	rep.Calls = scaled(calls)
	rep.CallsPerAgent = Span{Estimate: rep.Calls.Estimate / n, Low: rep.Calls.Low / n, High: rep.Calls.High / n}
	rep.PromptTokens = scaled(func(r batchagent.Result) int64 { return r.Usage.PromptTokens })
	cached := scaled(func(r batchagent.Result) int64 { return r.Usage.CachedTokens })
	rep.CachedTokens = &cached
	rep.CompletionTokens = scaled(func(r batchagent.Result) int64 { return r.Usage.CompletionTokens })
	if media := scaled(func(r batchagent.Result) int64 { return r.Usage.MediaTokens }); media.High > 0 {
		rep.MediaTokens = &media
	} else {
		rep.MediaTokens = nil
	}
	if !price.Known {
		return
	}
	costs := make([]float64, len(results))
	var spent float64
	for i, r := range results {
		costs[i] = price.Price.Cost(r.Usage)
		spent += costs[i]
	}
	slices.Sort(costs)
	f := float64(n)
	rep.Cost = &CostSpan{Estimate: f * costs[(len(costs)-1)/2], Low: f * costs[0], High: f * costs[len(costs)-1]}
	rep.SampleCost = &spent
}
