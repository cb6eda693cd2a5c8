package simhttp

import (
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// PromptTokens is the server's count of req's prompt tokens, as its
// usage reports them when an OpenAI-compatible client (backend/openai)
// sends req: the request is encoded as that client encodes it, decoded as
// the server decodes it, rendered in the server's ChatML-like template
// (leading system messages, the tools' JSON, the other messages, the
// assistant's header) and counted at [sim.BytesPerToken] bytes a token.
// It returns an error for a request the server would refuse.
func PromptTokens(req *llm.Request) (int, error) {
	body, err := oaiwire.AppendRequest(nil, req, oaiwire.RequestOptions{})
	if err != nil {
		return 0, fmt.Errorf("simhttp: %w", err)
	}
	var cr oaiwire.Request
	if err := json.Unmarshal(body, &cr); err != nil {
		return 0, fmt.Errorf("simhttp: %w", err)
	}
	_, prompt, _, apiErr := decode(&cr)
	if apiErr != nil {
		return 0, fmt.Errorf("simhttp: %s", apiErr.message)
	}
	return sim.Tokens(len(prompt)), nil
}
