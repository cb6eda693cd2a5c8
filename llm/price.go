package llm

// Price is what a model's tokens cost, in any currency (the project's
// tables use US dollars), per million tokens.
type Price struct {
	// Input is the price of a million prompt tokens neither served from
	// nor written to the backend's cache.
	Input float64
	// CachedInput is the price of a million cached prompt tokens (a cache
	// read). Zero means Input.
	CachedInput float64
	// Output is the price of a million completion tokens.
	Output float64
	// CacheWrite is the price of a million prompt tokens written to the
	// backend's cache (Anthropic's cache_creation_input_tokens: 1.25×
	// Input for the 5-minute cache). Zero means Input.
	CacheWrite float64
	// BatchDiscount is the fraction taken off every price for calls made
	// through a provider's batch API (0.5 for half price). Zero means none;
	// Cost does not apply it.
	BatchDiscount float64
}

// Cost returns the cost of u at p: prompt tokens neither read from nor
// written to the cache at Input, cached ones at CachedInput, ones written
// to the cache at CacheWrite (each at Input when zero), completion tokens
// at Output.
func (p Price) Cost(u Usage) float64 {
	cached := p.CachedInput
	if cached == 0 {
		cached = p.Input
	}
	write := p.CacheWrite
	if write == 0 {
		write = p.Input
	}
	plain := u.PromptTokens - u.CachedTokens - u.CacheWriteTokens
	return (float64(plain)*p.Input + float64(u.CachedTokens)*cached + float64(u.CacheWriteTokens)*write + float64(u.CompletionTokens)*p.Output) / 1e6
}
