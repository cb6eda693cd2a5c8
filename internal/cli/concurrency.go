package cli

import (
	"fmt"
	"net/url"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
)

// concurrencySource says where a run's limit on model calls in flight
// comes from, for the summary: the job file's limits.max_inflight, or the
// default of the backend URL's flavor (DefaultConcurrency of its
// llm.Capabilities: openai 8, openai+http(s) 16, vllm and sglang 64,
// llamacpp 8, ollama 4, sim+http 64, anthropic 4, bedrock 4; in-process
// sim none).
func concurrencySource(backendURL string, model llm.Model, maxInflight int) string {
	if maxInflight > 0 {
		return fmt.Sprintf("max %d: limits.max_inflight", maxInflight)
	}
	scheme := "backend"
	if u, err := url.Parse(backendURL); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	}
	if c, ok := model.(llm.Capable); ok && c.Capabilities().DefaultConcurrency > 0 {
		return fmt.Sprintf("max %d: %s default; limits.max_inflight sets it", c.Capabilities().DefaultConcurrency, scheme)
	}
	return scheme + " declares no limit; limits.max_inflight sets one"
}

// concurrencyLine renders the limit on model calls in flight: fixed or
// adaptive (where it started, its range, where it ended), and its source.
func concurrencyLine(st batchagent.Stats, source string) string {
	h := st.LimitHistory
	switch {
	case st.Limit == 0:
		return fmt.Sprintf("unlimited (%s)", source)
	case len(h) == 0:
		return fmt.Sprintf("fixed %d (%s)", st.Limit, source)
	}
	lo, hi := h[0].Limit, h[0].Limit
	for _, c := range h {
		lo, hi = min(lo, c.Limit), max(hi, c.Limit)
	}
	s := fmt.Sprintf("adaptive, start %d", h[0].Limit)
	if len(h) > 1 {
		s += fmt.Sprintf(", range %d..%d over %d changes, end %d", lo, hi, len(h)-1, h[len(h)-1].Limit)
	}
	return s + fmt.Sprintf(" (%s)", source)
}
