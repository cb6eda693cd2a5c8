package config

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/batchagent/batchagent"
)

// validateKnobs checks the sampling parameters, the back-off and the tool
// pool.
func (d *decoder) validateKnobs(job *Job) {
	j := &job.Def
	if j.MaxTokens < 0 && d.ok("max_tokens") {
		d.report(d.at("max_tokens"), "max_tokens", "must not be negative, got %d", j.MaxTokens)
	}
	if j.ContextWindow < 0 && d.ok("context_window") {
		d.report(d.at("context_window"), "context_window", "must not be negative, got %d", j.ContextWindow)
	}
	if j.ContextWindow > 0 && d.ok("context_window") {
		tokens, what := j.MaxTokens, strconv.Itoa(j.MaxTokens)
		if tokens == 0 {
			tokens, what = batchagent.DefaultMaxTokens, "the default "+strconv.Itoa(batchagent.DefaultMaxTokens)
		}
		if tokens >= j.ContextWindow {
			d.report(d.at("context_window"), "context_window", "must be above max_tokens (%s), got %d", what, j.ContextWindow)
		}
	}
	if j.MaxTokensLimit < 0 && d.ok("max_tokens_limit") {
		d.report(d.at("max_tokens_limit"), "max_tokens_limit", "must not be negative, got %d", j.MaxTokensLimit)
	}
	if j.MaxTokensLimit > 0 && d.ok("max_tokens_limit") {
		// Without max_tokens the default applies, and a limit below it
		// would be raised to it silently.
		tokens, what := j.MaxTokens, strconv.Itoa(j.MaxTokens)
		if tokens == 0 {
			tokens, what = batchagent.DefaultMaxTokens, "the default "+strconv.Itoa(batchagent.DefaultMaxTokens)
		}
		if tokens > j.MaxTokensLimit {
			d.report(d.at("max_tokens_limit"), "max_tokens_limit", "must be at least max_tokens (%s), got %d", what, j.MaxTokensLimit)
		}
	}
	if p := j.Temperature; p != nil && (*p < 0 || math.IsInf(*p, 0) || math.IsNaN(*p)) && d.ok("temperature") {
		d.report(d.at("temperature"), "temperature", "must be a number from 0 up, got %v", *p)
	}
	if p := j.TopP; p != nil && !(*p >= 0 && *p <= 1) && d.ok("top_p") {
		d.report(d.at("top_p"), "top_p", "must be a number from 0 to 1, got %v", *p)
	}
	for i, s := range j.Stop {
		if path := fmt.Sprintf("stop[%d]", i); s == "" && d.ok(path) {
			d.report(d.at(path), path, "must not be empty")
		}
	}
	for _, f := range []struct {
		path string
		v    time.Duration
	}{
		{"limits.backoff.base", j.Backoff.Base},
		{"limits.backoff.rate_limit_base", j.Backoff.RateLimitBase},
		{"limits.backoff.max", j.Backoff.Max},
		{"limits.probe_interval", job.Engine.Admission.Backpressure.Interval},
		{"tool_pool.cache_ttl", j.ToolPool.CacheTTL},
		{"tool_pool.timeout", j.ToolPool.Timeout},
	} {
		if f.v < 0 && d.ok(f.path) {
			d.report(d.at(f.path), f.path, "must not be negative, got %s", f.v)
		}
	}
	if b := j.Backoff; b.Max > 0 && b.Base > b.Max && d.ok("limits.backoff.base") {
		d.report(d.at("limits.backoff.base"), "limits.backoff.base", "must not exceed limits.backoff.max (%s), got %s", b.Max, b.Base)
	}
}
