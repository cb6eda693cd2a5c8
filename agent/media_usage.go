package agent

import (
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// withMediaTokens returns u, a call's usage for req, with its
// MediaTokens: as the backend reported them, else estimated from req's
// media parts under the backend's billing ([llm.Media.Billing]), at most
// the call's prompt tokens. A request without parts costs one pass over
// its messages and nothing else: the text path is not slowed.
func (r *Runner) withMediaTokens(req *llm.Request, u llm.Usage) llm.Usage {
	if u.MediaTokens != 0 {
		return u
	}
	n := 0
	b := media.Billing(r.media.Billing)
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		for j := range parts {
			n += media.Tokens(&parts[j], b)
		}
	}
	if n > 0 {
		u.MediaTokens = int64(n)
		if u.PromptTokens > 0 {
			u.MediaTokens = min(u.MediaTokens, u.PromptTokens)
		}
	}
	return u
}
