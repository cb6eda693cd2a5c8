package cli

import (
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
)

// applyKnobs sets on j the engine knobs of the job file that prepare's Job
// literal leaves out: sampling parameters, back-off, the queue probe's
// interval and the tool pool's cache, result cap and timeout. Zero values
// in the file leave the engine's defaults.
func applyKnobs(j *batchagent.Job, cj *config.Job) {
	j.MaxTokens, j.MaxTokensLimit = cj.MaxTokens, cj.MaxTokensLimit
	j.Temperature, j.TopP, j.Seed, j.Stop = cj.Temperature, cj.TopP, cj.Seed, cj.Stop
	j.Backoff.Base = time.Duration(cj.Limits.Backoff.Base)
	j.Backoff.RateLimitBase = time.Duration(cj.Limits.Backoff.RateLimitBase)
	j.Backoff.Max = time.Duration(cj.Limits.Backoff.Max)
	j.Backpressure.Interval = time.Duration(cj.Limits.ProbeInterval)
	j.ToolPool.CacheSize = cj.ToolPool.CacheSize
	j.ToolPool.CacheTTL = time.Duration(cj.ToolPool.CacheTTL)
	j.ToolPool.MaxResultBytes = cj.ToolPool.MaxResultBytes
	j.ToolPool.Timeout = time.Duration(cj.ToolPool.Timeout)
}
