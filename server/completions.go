package server

import (
	"encoding/json"

	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/llm"
)

// completionsWorst returns the most a legacy completions request can
// cost at p: its prompt's estimated tokens at the input price and its
// max_tokens (the engine's default when it sets none, as spend.Worst
// counts it) at the output price.
func completionsWorst(prompt json.RawMessage, maxTokens *int, p llm.Price) float64 {
	out := &llm.Request{}
	if maxTokens != nil {
		out.MaxTokens = *maxTokens
	}
	return float64(inputTokens(prompt))*p.Input/1e6 + spend.Worst(out, p)
}
