package server

import (
	"encoding/json"

	"github.com/batchagent/batchagent/llm"
)

// embeddingsWorst returns the most an embeddings request of input can
// cost at p: its text's estimated tokens (about four bytes a token,
// rounded up; a token id counts as one) at the input price. Embeddings
// have no output tokens.
func embeddingsWorst(input json.RawMessage, p llm.Price) float64 {
	return float64(inputTokens(input)) * p.Input / 1e6
}

// inputTokens estimates the tokens of a string-or-array field: a
// string's bytes over four, rounded up, plus one per string; an array of
// token ids, its length.
func inputTokens(raw json.RawMessage) int {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return (len(one)+3)/4 + 1
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) != nil {
		return (len(raw) + 3) / 4
	}
	n := 0
	for _, m := range many {
		var id int64
		if json.Unmarshal(m, &id) == nil {
			n++
			continue
		}
		n += inputTokens(m)
	}
	return n
}
