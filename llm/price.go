package llm

// Price is what a model's tokens cost, in any currency (the project's
// tables use US dollars), per million tokens.
type Price struct {
	// Input is the price of a million prompt tokens not served from the
	// backend's cache.
	Input float64
	// CachedInput is the price of a million cached prompt tokens. Zero
	// means Input.
	CachedInput float64
	// Output is the price of a million completion tokens.
	Output float64
	// BatchDiscount is the fraction taken off every price for calls made
	// through a provider's batch API (0.5 for half price). Zero means none;
	// Cost does not apply it.
	BatchDiscount float64
}

// Cost returns the cost of u at p: uncached prompt tokens at Input, cached
// ones at CachedInput (Input when that is zero), completion tokens at
// Output.
func (p Price) Cost(u Usage) float64 {
	cached := p.CachedInput
	if cached == 0 {
		cached = p.Input
	}
	return (float64(u.PromptTokens-u.CachedTokens)*p.Input + float64(u.CachedTokens)*cached + float64(u.CompletionTokens)*p.Output) / 1e6
}
