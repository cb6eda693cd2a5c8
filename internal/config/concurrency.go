package config

import (
	"fmt"
	"net/url"

	"github.com/batchagent/batchagent/llm"
)

// ConcurrencySource says where a run's limit on model calls in flight
// comes from, for the summary: the job file's limits.max_inflight, or the
// default of the backend URL's flavor (DefaultConcurrency of its
// llm.Capabilities: openai 8, openai+http(s) 16, vllm and sglang 64,
// llamacpp 8, ollama 4, sim+http 64, anthropic 4, bedrock 4; in-process
// sim none).
func ConcurrencySource(backendURL string, model llm.Model, maxInflight int) string {
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
