package config

import (
	"fmt"
	"math"
	"strconv"

	"github.com/batchagent/batchagent"
)

// Backoff spaces the retries of failed model calls: exponential back-off
// with full jitter, or the wait the backend asked for (Retry-After). Zero
// fields mean the engine defaults.
type Backoff struct {
	// Base is the back-off ceiling of a first retry; it doubles with each
	// attempt. Zero means the engine default (50ms).
	Base Duration `yaml:"base"`
	// RateLimitBase replaces Base after a rate-limit error that came
	// without a Retry-After. Zero means the engine default (1s).
	RateLimitBase Duration `yaml:"rate_limit_base"`
	// Max caps every wait. Zero means the engine default (30s).
	Max Duration `yaml:"max"`
}

// ToolPool configures the pool that runs every tool of a job. Zero fields
// mean the defaults.
type ToolPool struct {
	// CacheSize is the most results kept for cacheable tools, least
	// recently used dropped first. Zero means the default (4096); -1 turns
	// the cache off.
	CacheSize int `yaml:"cache_size"`
	// CacheTTL is how long a cached result stays valid. Zero means the
	// default (10m).
	CacheTTL Duration `yaml:"cache_ttl"`
	// MaxResultBytes cuts longer tool results, with a marker saying so.
	// Zero means the default (64 KiB); -1 means no limit.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// Timeout bounds each tool execution, unless the tool's own timeout
	// says otherwise. Zero means none.
	Timeout Duration `yaml:"timeout"`
}

// validateKnobs checks the sampling parameters, the back-off, the tool
// pool and the tool options that take -1.
func (d *decoder) validateKnobs(j *Job) {
	if j.MaxTokens < 0 && d.ok("max_tokens") {
		d.report(d.at("max_tokens"), "max_tokens", "must not be negative, got %d", j.MaxTokens)
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
		v    Duration
	}{
		{"limits.backoff.base", j.Limits.Backoff.Base},
		{"limits.backoff.rate_limit_base", j.Limits.Backoff.RateLimitBase},
		{"limits.backoff.max", j.Limits.Backoff.Max},
		{"limits.probe_interval", j.Limits.ProbeInterval},
		{"tool_pool.cache_ttl", j.ToolPool.CacheTTL},
		{"tool_pool.timeout", j.ToolPool.Timeout},
	} {
		if f.v < 0 && d.ok(f.path) {
			d.report(d.at(f.path), f.path, "must not be negative, got %s", f.v)
		}
	}
	if b := j.Limits.Backoff; b.Max > 0 && b.Base > b.Max && d.ok("limits.backoff.base") {
		d.report(d.at("limits.backoff.base"), "limits.backoff.base", "must not exceed limits.backoff.max (%s), got %s", b.Max, b.Base)
	}
	minusOne := []struct {
		path string
		v    int
	}{
		{"tool_pool.cache_size", j.ToolPool.CacheSize},
		{"tool_pool.max_result_bytes", j.ToolPool.MaxResultBytes},
	}
	for i, t := range j.Tools {
		minusOne = append(minusOne, struct {
			path string
			v    int
		}{fmt.Sprintf("tools[%d].max_redirects", i), t.MaxRedirects})
	}
	for _, f := range minusOne {
		if f.v < -1 && d.ok(f.path) {
			d.report(d.at(f.path), f.path, "must be -1 (off) or more, got %d", f.v)
		}
	}
	for i, m := range j.MCP {
		if path := fmt.Sprintf("mcp[%d].connect_timeout", i); m.ConnectTimeout < 0 && d.ok(path) {
			d.report(d.at(path), path, "must not be negative, got %s", m.ConnectTimeout)
		}
	}
}
