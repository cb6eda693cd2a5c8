package jobrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/tool"
)

// TestPrepareKeepsEveryKnob checks that what the job file sets reaches the
// Spec the engine runs, with what the CLI adds (the ID from the file name,
// the model, the tools and their policies), and that the limits reach the
// engine.
func TestPrepareKeepsEveryKnob(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"x": 1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "knobs.yaml")
	if err := os.WriteFile(path, []byte(`task: "x {x}"
inputs: in.jsonl
max_tokens: 300
max_tokens_limit: 900
temperature: 0
top_p: 0.5
seed: -7
stop: [END]
limits:
  max_turns: 3
  max_retries: off
  max_inflight: 5
  outage_budget: 2s
  backoff: {base: 10ms, rate_limit_base: 3s, max: 20s}
  probe_interval: 1s
tool_pool: {cache_size: 12, cache_ttl: 1m, max_result_bytes: off, timeout: 4s}
tools:
  - {name: list_dir, roots: [docs], rate: 2}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(t.Context(), path, Options{NoState: true}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := r.spec.Def()
	want := batchagent.Def{
		ID:             "knobs",
		Task:           "x {x}",
		MaxTurns:       3,
		NoRetries:      true,
		OutageBudget:   2 * time.Second,
		Backoff:        batchagent.Backoff{Base: 10 * time.Millisecond, RateLimitBase: 3 * time.Second, Max: 20 * time.Second},
		MaxTokens:      300,
		MaxTokensLimit: 900,
		Temperature:    new(0.0),
		TopP:           new(0.5),
		Seed:           new(int64(-7)),
		Stop:           []string{"END"},
		ToolPool: tool.PoolConfig{CacheSize: 12, CacheTTL: time.Minute, MaxResultBytes: -1, Timeout: 4 * time.Second,
			Policies: map[string]tool.Policy{"list_dir": {Rate: 2}}},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(batchagent.Def{}, "Model", "Tools", "Check")); diff != "" {
		t.Errorf("prepared spec mismatch (-want +got):\n%s", diff)
	}
	if got.Model == nil || len(got.Tools) != 1 || got.Tools[0].Spec().Name != "list_dir" {
		t.Errorf("prepared spec has model %v and tools %v, want the simulator and list_dir", got.Model, got.Tools)
	}
	if want := "max 5: limits.max_inflight"; r.limitSource != want {
		t.Errorf("limit source = %q, want %q", r.limitSource, want)
	}
}
