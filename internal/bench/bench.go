// Package bench holds the whole-system scenarios behind `batchagent bench`:
// each runs the same workload through the engine and through a naive Go
// baseline, on the simulator, and reports wall time against the scenario's
// physical limit (ideal_s), throughput, tool executions, model calls, peak
// RSS and CPU time, as ../shared/BENCHMARKS.md defines them.
// [StartProfiles] writes the CPU profile and execution trace that the
// command's --cpuprofile and --trace ask for.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// Options configures a scenario run. The zero value runs the scenario's
// defaults in both modes.
type Options struct {
	// N is the number of agents. Zero means the scenario's default.
	N int
	// Fail is the share of model calls that fail transiently (fair only).
	Fail float64
	// Seed seeds the simulator. Zero means 1.
	Seed uint64
	// Modes lists the modes to run ("engine", "naive"). Empty means both.
	Modes []string
	// JSON prints one JSON object per line instead of a table.
	JSON bool
	// Dir is where input, output and document files are written. Empty
	// means a temporary directory, removed afterwards.
	Dir string
	// State adds an engine run that checkpoints every agent into a SQLite
	// store (mode "engine+state"), to measure the store's cost. The dedup
	// scenario, whose modes are all engine runs, refuses it.
	State bool
	// Count runs every mode Count times, in rounds (each mode once per
	// round), and reports for each mode its run of median throughput, so
	// that comparisons between modes survive a noisy machine. Zero means
	// once.
	Count int

	// Backend is the URL of the OpenAI-compatible server the live scenario
	// runs against (openai+http://HOST:PORT/v1, ollama://HOST:PORT, ...).
	// Required by live; other scenarios refuse it.
	Backend string
	// Model is the model name sent to Backend when its URL names none.
	// Empty means the server's default.
	Model string
	// APIKey is sent to Backend as a bearer token. Empty means none.
	APIKey llm.Secret
	// MaxTokens caps each answer of the live scenario. Defaults to
	// DefaultLiveMaxTokens.
	MaxTokens int

	// Rate and Duration are the gateway scenario's sustained request rate
	// and how long each of its phases lasts. Default to
	// DefaultGatewayRate and DefaultGatewayDuration.
	Rate     int
	Duration time.Duration

	// Corrupt is the share of packed entries the pack scenario's
	// simulator corrupts. Defaults to 0; other scenarios refuse it.
	Corrupt float64
	// Profile names the pack scenario's server profile
	// (simhttp.Profiles); PositionBias is its simulator's
	// sim.Config.PositionBias. Other scenarios refuse them.
	Profile      string
	PositionBias float64

	// KillAt is the provider-batch scenario's ProviderBatchOptions.KillAt;
	// other scenarios refuse it.
	KillAt int

	// TimeScale scales the agentic scenario's durations (tool latencies,
	// the simulator's step times). Defaults to DefaultAgenticTimeScale;
	// other scenarios refuse it.
	TimeScale float64
}

// Report is one line of output: one scenario in one mode. Field names are
// the JSON keys of BENCHMARKS.md; new fields may be added, never renamed.
type Report struct {
	Scenario      string  `json:"scenario"`
	Mode          string  `json:"mode"`
	N             int     `json:"n"`
	WallS         float64 `json:"wall_s"`
	IdealS        float64 `json:"ideal_s"`
	Ratio         float64 `json:"ratio"`
	AgentsPerS    float64 `json:"agents_per_s"`
	OK            int     `json:"ok"`
	Failed        int     `json:"failed"`
	ToolRequested int64   `json:"tool_requested"`
	ToolExecuted  int64   `json:"tool_executed"`
	LLMCalls      int64   `json:"llm_calls"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	CPUS          float64 `json:"cpu_s"`
	// MaxRetried is the most failed model calls of any one agent (fair
	// with failures: ideal_s includes them).
	MaxRetried int `json:"max_retried,omitempty"`
	// MaxInflight is the slot limit, when the scenario sets one.
	MaxInflight int `json:"max_inflight,omitempty"`

	// Fields of the server and live scenarios (nil elsewhere). TTFT runs
	// from the moment an agent is ready to call the model, local waits
	// included, to its first streamed token. CachedShare is cached prompt
	// tokens over prompt tokens; HTTP429 counts the requests the server
	// refused.
	TTFTP50S    *float64 `json:"ttft_p50_s,omitempty"`
	TTFTP95S    *float64 `json:"ttft_p95_s,omitempty"`
	CachedShare *float64 `json:"cached_share,omitempty"`
	HTTP429     *int64   `json:"http_429,omitempty"`
	// ServerRequests counts the HTTP requests the server received (live:
	// the requests the client sent).
	ServerRequests int64 `json:"server_requests,omitempty"`
	// Token counts the server reported (live), and the cap on each answer.
	PromptTokens     int64 `json:"prompt_tokens,omitempty"`
	CompletionTokens int64 `json:"completion_tokens,omitempty"`
	MaxTokens        int   `json:"max_tokens,omitempty"`
	// TokensPerS is the completion tokens the server reported over wall_s
	// (live): the decode throughput the mode drew from the server.
	TokensPerS *float64 `json:"tokens_per_s,omitempty"`
	// SchemaValidShare is the share of agents whose final answer parsed
	// and validated against the output schema (live).
	SchemaValidShare *float64 `json:"schema_valid_share,omitempty"`

	// StateShare is, for mode engine+state, its throughput over that of
	// mode engine run just before it in the same round: the median of
	// those ratios over the rounds (--count).
	StateShare *float64 `json:"state_share,omitempty"`
	// Runs is how many times the mode ran when Options.Count asked for
	// more than one; the report is the run of median throughput.
	Runs int `json:"runs,omitempty"`

	// Fields of the dedup scenario: how the tool calls that did not
	// execute were saved.
	ToolCacheHits int64 `json:"tool_cache_hits,omitempty"`
	ToolCoalesced int64 `json:"tool_coalesced,omitempty"`
	ToolBatches   int64 `json:"tool_batches,omitempty"`
}

// Scenarios lists the scenario names in the order they are documented.
var Scenarios = []string{"fair", "slots", "scale", "server", "dedup", "live", "submit", "share", "gateway", "batch", "npc", "pack", "scaleout", "agentic", "ratelimit", "provider-batch"}

// Run runs scenario and writes its reports to w.
func Run(ctx context.Context, scenario string, opt Options, w io.Writer) ([]Report, error) {
	if scenario != "pack" && (opt.Profile != "" || opt.PositionBias != 0) {
		return nil, fmt.Errorf("bench: --profile and --position-bias apply to the pack scenario only, not %s", scenario)
	}
	var (
		wl    workload
		known = []string{"engine", "naive"} // the scenario's modes, in order
	)
	switch scenario {
	case "fair":
		wl = workload{name: "fair", n: 200, latency: 60 * time.Millisecond, toolDelay: 200 * time.Millisecond, fail: opt.Fail}
	case "slots":
		wl = workload{name: "slots", n: 200, latency: 60 * time.Millisecond, toolDelay: 400 * time.Millisecond, maxInflight: 8, fail: opt.Fail}
	case "scale":
		wl = workload{name: "scale", n: 100_000, latency: time.Millisecond, files: true, fail: opt.Fail}
	case "server":
		wl = workload{name: "server", n: 100, server: true}
	case "dedup":
		wl = workload{name: "dedup", n: dedupN, latency: dedupLatency, fail: opt.Fail, dedup: true}
		known = dedupModes
	case "live":
		if opt.Corrupt != 0 {
			return nil, errors.New("bench: --corrupt applies to the pack scenario only, not live")
		}
		if opt.N < 0 || opt.Count < 0 {
			return nil, fmt.Errorf("bench: -n and -count must be positive")
		}
		return runLive(ctx, opt, w)
	case "submit", "share":
		return runShareScenario(ctx, scenario, opt, w)
	case "gateway":
		if opt.N != 0 || opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Corrupt != 0 {
			return nil, errors.New("bench: gateway takes only --rate, --duration and --json")
		}
		_, err := RunGateway(ctx, GatewayOptions{Rate: opt.Rate, Duration: opt.Duration, JSON: opt.JSON}, w)
		return nil, err
	case "batch":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Rate != 0 || opt.Duration != 0 || opt.Corrupt != 0 {
			return nil, errors.New("bench: batch takes only -n, --dir and --json")
		}
		_, err := RunBatch(ctx, BatchOptions{N: opt.N, Dir: opt.Dir, JSON: opt.JSON}, w)
		return nil, err
	case "npc":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Rate != 0 || opt.Duration != 0 || opt.Dir != "" || opt.Corrupt != 0 {
			return nil, errors.New("bench: npc takes only -n and --json")
		}
		_, err := RunNPC(ctx, NPCOptions{N: opt.N, JSON: opt.JSON}, w)
		return nil, err
	case "pack":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Rate != 0 || opt.Duration != 0 || opt.Dir != "" {
			return nil, errors.New("bench: pack takes only -n, --corrupt, --profile, --position-bias, --seed and --json")
		}
		_, err := RunPack(ctx, PackOptions{N: opt.N, Corrupt: opt.Corrupt, Profile: opt.Profile, PositionBias: opt.PositionBias, Seed: opt.Seed, JSON: opt.JSON}, w)
		return nil, err
	case "ratelimit":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Rate != 0 || opt.Duration != 0 || opt.Corrupt != 0 || opt.TimeScale != 0 {
			return nil, errors.New("bench: ratelimit takes only -n, --dir and --json")
		}
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: ratelimit runs this binary's worker command: %w", err)
		}
		_, err = RunRatelimit(ctx, RatelimitOptions{N: opt.N, JSON: opt.JSON, Exe: exe, Dir: opt.Dir}, w)
		return nil, err
	case "agentic":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || opt.Rate != 0 || opt.Duration != 0 || opt.Dir != "" || opt.Corrupt != 0 {
			return nil, errors.New("bench: agentic takes only -n, --mode, --seed, --time-scale and --json")
		}
		_, err := RunAgentic(ctx, AgenticOptions{N: opt.N, Seed: opt.Seed, Modes: opt.Modes, TimeScale: opt.TimeScale, JSON: opt.JSON}, w)
		return nil, err
	case "scaleout":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Rate != 0 || opt.Duration != 0 || opt.Corrupt != 0 {
			return nil, errors.New("bench: scaleout takes only -n, --dir and --json")
		}
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: scaleout runs this binary's worker command: %w", err)
		}
		_, err = RunScaleout(ctx, exe, ScaleoutOptions{N: opt.N, Dir: opt.Dir, JSON: opt.JSON}, w)
		return nil, err
	case "provider-batch":
		if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 || opt.State || opt.Fail != 0 || opt.Count > 1 || len(opt.Modes) > 0 || opt.Rate != 0 || opt.Duration != 0 || opt.Corrupt != 0 || opt.TimeScale != 0 {
			return nil, errors.New("bench: provider-batch takes only -n, --kill-at, --dir and --json")
		}
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: provider-batch runs this binary's run command: %w", err)
		}
		_, err = RunProviderBatch(ctx, exe, ProviderBatchOptions{N: opt.N, KillAt: opt.KillAt, Dir: opt.Dir, JSON: opt.JSON}, w)
		return nil, err
	default:
		return nil, fmt.Errorf("bench: unknown scenario %q (known: %s)", scenario, strings.Join(Scenarios, ", "))
	}
	if opt.KillAt != 0 {
		return nil, fmt.Errorf("bench: --kill-at applies to the provider-batch scenario only, not %s", scenario)
	}
	if opt.Corrupt != 0 {
		return nil, fmt.Errorf("bench: --corrupt applies to the pack scenario only, not %s", scenario)
	}
	if opt.TimeScale != 0 {
		return nil, fmt.Errorf("bench: --time-scale applies to the agentic scenario only, not %s", scenario)
	}
	if opt.Backend != "" || opt.Model != "" || opt.MaxTokens != 0 {
		return nil, fmt.Errorf("bench: --backend, --model and --max-tokens apply to the live scenario only, not %s", scenario)
	}
	if opt.N < 0 || opt.Count < 0 || opt.Fail < 0 || opt.Fail > 1 {
		return nil, fmt.Errorf("bench: -n and -count must be positive and -fail within [0, 1]")
	}
	if opt.N > 0 {
		wl.n = opt.N
	}
	wl.seed = opt.Seed
	if wl.seed == 0 {
		wl.seed = 1
	}
	modes := opt.Modes
	if len(modes) == 0 {
		modes = known
	}
	if wl.dedup {
		if opt.State {
			return nil, errors.New("bench: -state does not apply to dedup")
		}
		for _, m := range modes {
			if !slices.Contains(dedupModes, m) {
				return nil, fmt.Errorf("bench: unknown mode %q for dedup (known: %s)", m, strings.Join(dedupModes, ", "))
			}
		}
	} else {
		if opt.State && !slices.Contains(modes, "engine+state") {
			// Right after engine, which it is compared with.
			at := len(modes)
			if i := slices.Index(modes, "engine"); i >= 0 {
				at = i + 1
			}
			modes = slices.Insert(slices.Clone(modes), at, "engine+state")
		}
		for _, m := range modes {
			if m != "engine" && m != "naive" && m != "engine+state" {
				return nil, fmt.Errorf("bench: unknown mode %q (known: engine, naive, engine+state)", m)
			}
		}
	}
	env, err := newEnv(opt.Dir, wl)
	if err != nil {
		return nil, err
	}
	defer env.close()

	var reports []Report
	if !opt.JSON {
		fmt.Fprintln(w, tableHeader)
	}
	if wl.server {
		// The physical limit: one request alone on a fresh server.
		one := wl
		one.n = 1
		_, wall, err := runServer(ctx, one, "naive")
		if err != nil {
			return nil, err
		}
		wl.serverIdeal = wall
	}
	count := max(opt.Count, 1)
	runs := make(map[string][]Report, len(modes))
	for range count {
		for _, mode := range modes {
			rep, err := measure(ctx, env, wl, mode)
			if err != nil {
				return reports, err
			}
			runs[mode] = append(runs[mode], rep)
		}
	}
	for _, mode := range modes {
		rep := median(runs[mode])
		if count > 1 {
			rep.Runs = count
		}
		if mode == "engine+state" && len(runs["engine"]) == count {
			if share, ok := pairedShare(runs["engine+state"], runs["engine"]); ok {
				rep.StateShare = &share
			}
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

// pairedShare returns the median over rounds of a's throughput over b's
// in the same round (a[i] and b[i] ran one after the other), rounded to
// three places; false when b has no throughput. The machine's speed drifts between
// rounds (the same binary measured 129,000 and 179,000 agents/s twenty
// minutes apart on the 2-core reference machine); a ratio within one
// round cancels that drift, a ratio of two medians from different rounds
// does not.
func pairedShare(a, b []Report) (float64, bool) {
	shares := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		if b[i].AgentsPerS <= 0 {
			return 0, false
		}
		shares = append(shares, a[i].AgentsPerS/b[i].AgentsPerS)
	}
	if len(shares) == 0 {
		return 0, false
	}
	slices.Sort(shares)
	m := shares[(len(shares)-1)/2] // the lower one of an even count, as median
	return math.Round(1000*m) / 1000, true
}

// median returns the run of median throughput (the lower one of an even
// count).
func median(runs []Report) Report {
	sorted := slices.SortedFunc(slices.Values(runs), func(a, b Report) int { return cmp.Compare(a.AgentsPerS, b.AgentsPerS) })
	return sorted[(len(sorted)-1)/2]
}

const tableHeader = "scenario mode             n      wall_s  ideal_s  ratio  agents/s     ok  failed  tool_req  tool_exec  llm_calls  rss_mb  cpu_s"

func tableRow(r Report) string {
	return fmt.Sprintf("%-8s %-12s %7d %8.3f %8.3f %6.2f %9.0f %6d %7d %9d %10d %10d %7.0f %6.2f",
		r.Scenario, r.Mode, r.N, r.WallS, r.IdealS, r.Ratio, r.AgentsPerS, r.OK, r.Failed,
		r.ToolRequested, r.ToolExecuted, r.LLMCalls, r.PeakRSSMB, r.CPUS)
}
