package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
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

// runDedup runs the dedup scenario's modes and writes their reports to w.
func runDedup(ctx context.Context, opt Options, w io.Writer) ([]Report, error) {
	if opt.N < 0 || opt.Fail < 0 || opt.Fail > 1 {
		return nil, fmt.Errorf("bench: -n must be positive and -fail within [0, 1]")
	}
	modes := opt.Modes
	if len(modes) == 0 {
		modes = dedupModes
	}
	for _, m := range modes {
		if !slices.Contains(dedupModes, m) {
			return nil, fmt.Errorf("bench: unknown mode %q for dedup (known: %s)", m, strings.Join(dedupModes, ", "))
		}
	}
	wl := workload{name: "dedup", n: dedupN, latency: dedupLatency, fail: opt.Fail, seed: opt.Seed}
	if opt.N > 0 {
		wl.n = opt.N
	}
	if wl.seed == 0 {
		wl.seed = 1
	}
	env, err := newEnv(opt.Dir, wl)
	if err != nil {
		return nil, err
	}
	defer env.close()

	if !opt.JSON {
		fmt.Fprintln(w, tableHeader)
	}
	var reports []Report
	for _, mode := range modes {
		rep, err := measureDedup(ctx, env, wl, mode)
		if err != nil {
			return reports, err
		}
		reports = append(reports, rep)
		if opt.JSON {
			b, _ := json.Marshal(rep)
			fmt.Fprintln(w, string(b))
		} else {
			fmt.Fprintln(w, tableRow(rep))
		}
	}
	return reports, nil
}

// measureDedup runs one mode of the dedup scenario and reports it.
func measureDedup(ctx context.Context, e *env, wl workload, mode string) (Report, error) {
	j := batchagent.Job{
		ID:           "dedup-" + mode,
		System:       system,
		Task:         task,
		OutputSchema: json.RawMessage(outSchema),
		MaxActive:    wl.n, // all agents at once
	}
	var ideal time.Duration
	switch mode {
	case "cache":
		wl.toolDelay = dedupCacheDelay
		j.MaxActive = max(1, wl.n/dedupWaves)
		// The first wave reads the file; every later wave only thinks.
		waves := (wl.n + j.MaxActive - 1) / j.MaxActive
		ideal = time.Duration(2*waves)*wl.latency + wl.toolDelay
	case "coalesce":
		wl.toolDelay = dedupToolDelay
		j.ToolPool = tool.PoolConfig{CacheSize: -1}
		ideal = 2*wl.latency + wl.toolDelay
	case "batch":
		j.Task = lookupTask
		ideal = 2*wl.latency + tool.DefaultBatchWindow + dedupBatchDelay
	}
	if mode == "batch" {
		j.Tools = []tool.Tool{lookupTool()}
	} else {
		rt, err := e.readTool(wl)
		if err != nil {
			return Report{}, err
		}
		j.Tools = []tool.Tool{rt}
	}
	m, err := sim.New(sim.Config{Latency: wl.latency, FailRate: wl.fail, Seed: wl.seed, ToolTurns: 1})
	if err != nil {
		return Report{}, err
	}
	j.Model = m
	eng, err := batchagent.New(j)
	if err != nil {
		return Report{}, err
	}
	ins := make([]batchagent.Input, wl.n)
	for i := range ins {
		ins[i] = batchagent.Input{"id": fmt.Sprint(i), "key": fmt.Sprintf("k%d", i%dedupKeys)}
	}

	runtime.GC()
	resetPeakRSS()
	cpu0 := cpuTime()
	start := time.Now()
	var t tally
	for r := range eng.Stream(ctx, batchagent.Slice(ins)) {
		t.count(r)
	}
	wall := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Report{}, fmt.Errorf("bench dedup %s: %w", mode, err)
	}
	st := eng.Stats()
	rep := Report{
		Scenario:      "dedup",
		Mode:          mode,
		N:             wl.n,
		WallS:         round(wall.Seconds(), 4),
		IdealS:        round(ideal.Seconds(), 4),
		Ratio:         round(wall.Seconds()/ideal.Seconds(), 3),
		AgentsPerS:    round(float64(wl.n)/wall.Seconds(), 0),
		OK:            t.ok,
		Failed:        t.failed,
		ToolRequested: t.toolReq,
		ToolExecuted:  st.ToolExecuted,
		LLMCalls:      t.llmCalls,
		PeakRSSMB:     round(peakRSSMB(), 1),
		CPUS:          round((cpuTime() - cpu0).Seconds(), 3),
		MaxRetried:    t.maxRetried,
	}
	for _, ts := range st.Tools {
		rep.ToolCacheHits += ts.CacheHits
		rep.ToolCoalesced += ts.Coalesced
		rep.ToolBatches += ts.Batches
	}
	return rep, nil
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
