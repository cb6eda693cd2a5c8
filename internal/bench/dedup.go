package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/tool"
)

// The dedup scenario: shared tool work done once. Each mode runs N
// two-turn agents through the engine on the simulator and reports how many
// tool executions their N tool calls cost.
//   - cache: every agent reads doc.txt through the cacheable read_file;
//     agents run in dedupWaves waves (MaxActive n/dedupWaves), so after the
//     first wave, whose calls coalesce, every read is a cache hit.
//   - coalesce: the same reads with caching off, all agents at once, the
//     tool slow enough (200 ms) that every call overlaps the first.
//   - batch: every agent looks up one of dedupKeys keys through a batchable
//     tool (20 ms a batch); identical keys coalesce and distinct ones share
//     a batch.
const (
	dedupN          = 200
	dedupLatency    = 60 * time.Millisecond  // per forward pass
	dedupCacheDelay = 20 * time.Millisecond  // read_file, cache mode
	dedupToolDelay  = 200 * time.Millisecond // read_file, coalesce mode
	dedupBatchDelay = 20 * time.Millisecond  // lookup, per batch
	dedupWaves      = 10                     // waves of agents, cache mode
	dedupKeys       = 20
	lookupTask      = "Look up key: {key} and report on item {id}."
)

// dedupModes lists the modes of the dedup scenario in order.
var dedupModes = []string{"cache", "coalesce", "batch"}

// dedupIdeal is the physical limit of a dedup mode: two forward passes
// per agent, plus one tool execution on the critical path; in cache mode
// the waves of agents run one after the other.
func dedupIdeal(wl workload, mode string) time.Duration {
	switch mode {
	case "cache":
		active := max(1, wl.n/dedupWaves)
		waves := (wl.n + active - 1) / active
		// The first wave reads the file; every later wave only thinks.
		return time.Duration(2*waves)*wl.latency + dedupCacheDelay
	case "coalesce":
		return 2*wl.latency + dedupToolDelay
	default: // batch
		return 2*wl.latency + tool.DefaultBatchWindow + dedupBatchDelay
	}
}

// runDedup runs one mode of the dedup scenario through the engine.
func runDedup(ctx context.Context, e *env, wl workload, mode string) (tally, error) {
	j := batchagent.Def{
		ID:           "dedup-" + mode,
		System:       system,
		Task:         task,
		OutputSchema: json.RawMessage(outSchema),
	}
	cfg := batchagent.Config{MaxActive: wl.n} // all agents at once
	switch mode {
	case "cache":
		wl.toolDelay = dedupCacheDelay
		cfg.MaxActive = max(1, wl.n/dedupWaves)
	case "coalesce":
		wl.toolDelay = dedupToolDelay
		j.ToolPool = tool.PoolConfig{CacheSize: -1}
	case "batch":
		j.Task = lookupTask
	}
	if mode == "batch" {
		j.Tools = []tool.Tool{lookupTool()}
	} else {
		rt, err := e.readTool(wl)
		if err != nil {
			return tally{}, err
		}
		j.Tools = []tool.Tool{rt}
	}
	m, err := sim.New(sim.Config{Latency: wl.latency, FailRate: wl.fail, Seed: wl.seed, ToolTurns: 1})
	if err != nil {
		return tally{}, err
	}
	j.Model = m
	ins := ids(wl.n)
	for i, in := range ins {
		in["key"] = fmt.Sprintf("k%d", i%dedupKeys)
	}
	var t tally
	st, err := stream(ctx, cfg, j, batchagent.Slice(ins), func(r batchagent.Result) error {
		t.count(r)
		return nil
	})
	if err != nil {
		return t, err
	}
	t.toolExec = st.ToolExecuted
	for _, ts := range st.Tools {
		t.cacheHits += ts.CacheHits
		t.coalesced += ts.Coalesced
		t.batches += ts.Batches
	}
	return t, ctx.Err()
}

// lookupTool is a batchable keyed lookup over an in-memory table of
// dedupKeys entries: one batch, whatever its size, takes dedupBatchDelay,
// like one round trip to a database.
func lookupTool() tool.Tool {
	table := make(map[string]string, dedupKeys)
	for i := range dedupKeys {
		table[fmt.Sprintf("k%d", i)] = fmt.Sprintf("value %d", i*i)
	}
	spec := tool.Spec{
		Name:        "lookup",
		Description: "Look up the value stored under a key.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","description":"The key to look up."}},"required":["key"],"additionalProperties":false}`),
	}
	return tool.BatchFunc(spec, func(ctx context.Context, args []json.RawMessage) []tool.Result {
		results := make([]tool.Result, len(args))
		t := time.NewTimer(dedupBatchDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			for i := range results {
				results[i].Err = ctx.Err()
			}
			return results
		}
		for i, a := range args {
			var q struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(a, &q); err != nil {
				results[i].Err = fmt.Errorf("%w: %w", tool.ErrBadArguments, err)
				continue
			}
			v, ok := table[q.Key]
			if !ok {
				results[i].Err = fmt.Errorf("no key %q", q.Key)
				continue
			}
			results[i].Content = v
		}
		return results
	})
}
