package cli

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool"
)

// TestApplyKnobs checks that every engine knob of the job file lands in
// the batchagent.Job, and that the fields set before are kept.
func TestApplyKnobs(t *testing.T) {
	cj, err := config.Parse([]byte(`task: x
max_tokens: 300
max_tokens_limit: 900
temperature: 0
top_p: 0.5
seed: -7
stop: [END]
limits:
  backoff: {base: 10ms, rate_limit_base: 3s, max: 20s}
  probe_interval: 1s
tool_pool: {cache_size: 12, cache_ttl: 1m, max_result_bytes: -1, timeout: 4s}
`), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j := batchagent.Job{
		Task:         "x",
		ToolPool:     tool.PoolConfig{Policies: map[string]tool.Policy{"t": {Rate: 1}}},
		Backpressure: batchagent.Backpressure{MaxQueued: 9},
	}
	applyKnobs(&j, cj)
	want := batchagent.Job{
		Task:           "x",
		MaxTokens:      300,
		MaxTokensLimit: 900,
		Temperature:    new(0.0),
		TopP:           new(0.5),
		Seed:           new(int64(-7)),
		Stop:           []string{"END"},
		Backoff:        batchagent.Backoff{Base: 10 * time.Millisecond, RateLimitBase: 3 * time.Second, Max: 20 * time.Second},
		Backpressure:   batchagent.Backpressure{MaxQueued: 9, Interval: time.Second},
		ToolPool: tool.PoolConfig{CacheSize: 12, CacheTTL: time.Minute, MaxResultBytes: -1, Timeout: 4 * time.Second,
			Policies: map[string]tool.Policy{"t": {Rate: 1}}},
	}
	if diff := cmp.Diff(want, j, cmpopts.IgnoreFields(batchagent.Job{}, "Check", "OnResult", "RateLimit")); diff != "" {
		t.Errorf("applyKnobs mismatch (-want +got):\n%s", diff)
	}
}
