package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/bench"
	"github.com/batchagent/batchagent/llm"
)

func (a *app) benchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench SCENARIO [flags]",
		Short: "Run a whole-system benchmark scenario: the engine against a naive baseline",
		Long: fmt.Sprintf(`Run a benchmark scenario against the simulator: each scenario runs the engine
and a naive baseline (one goroutine per agent, no shared slots, no tool
coalescing) on the same workload and prints a table, or with --json one JSON
object per mode (scenario, mode, n, wall_s, ideal_s, ratio, agents_per_s, ok,
failed, tool_requested, tool_executed, llm_calls, peak_rss_mb, cpu_s, ...).

live runs the same comparison against a real OpenAI-compatible server
(--backend URL; API key from $OPENAI_API_KEY, if set).

Scenarios: %s.`, strings.Join(bench.Scenarios, ", ")),
		Example: `  batchagent bench fair -n 200 --json
  batchagent bench fair --fail 0.02 --mode engine,naive
  batchagent bench slots --count 5
  batchagent bench pack --corrupt 0.1 --json
  batchagent bench provider-batch --kill-at 2 --json
  batchagent bench agentic --json
  batchagent bench agentic -n 500 --mode naive,las,las+cont --time-scale 0.05
  batchagent bench live --backend openai+http://127.0.0.1:11434/v1 --model llama3 -n 48 --json`,
		Args:      exactArgs(1, "one scenario ("+strings.Join(bench.Scenarios, ", ")+")"),
		ValidArgs: bench.Scenarios,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSignals(cmd.Context(), func(ctx context.Context) int {
				return benchCmd(ctx, args[0], f, a.stdout, a.stderr)
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.opt.N, "n", "n", 0, "number of agents (0: the scenario's default)")
	fl.Float64Var(&f.opt.Fail, "fail", 0, "share of model calls that fail transiently, in [0, 1]")
	fl.Uint64Var(&f.opt.Seed, "seed", 1, "simulator seed")
	fl.BoolVar(&f.opt.JSON, "json", false, "print one JSON object per mode")
	fl.StringSliceVar(&f.opt.Modes, "mode", nil, "modes to run, comma-separated: engine,naive (dedup: cache,coalesce,batch); default all")
	fl.BoolVar(&f.opt.State, "state", false, "also run the engine with a SQLite checkpoint store (mode engine+state)")
	fl.IntVar(&f.opt.Count, "count", 1, "run each mode this many times, in rounds, and report each mode's run of median throughput")
	fl.StringVar(&f.opt.Dir, "dir", "", "directory for the scenario's files (default: a temporary one)")
	fl.StringVar(&f.opt.Backend, "backend", "", "live: the server's URL (openai+http://HOST:PORT/v1, ollama://HOST:PORT, vllm://...)")
	fl.StringVar(&f.opt.Model, "model", "", "live: model name, when the URL names none")
	fl.IntVar(&f.opt.MaxTokens, "max-tokens", 0, fmt.Sprintf("live: cap on each answer's tokens (0: %d)", bench.DefaultLiveMaxTokens))
	fl.IntVar(&f.opt.Rate, "rate", 0, fmt.Sprintf("gateway: requests per second (0: %d)", bench.DefaultGatewayRate))
	fl.DurationVar(&f.opt.Duration, "duration", 0, fmt.Sprintf("gateway: how long each phase lasts (0: %v)", bench.DefaultGatewayDuration))
	fl.Float64Var(&f.opt.Corrupt, "corrupt", 0, "pack: share of packed entries the simulator corrupts, in [0, 1]")
	fl.StringVar(&f.opt.Profile, "profile", "", "pack: server profile ("+strings.Join(simhttp.Profiles, ", ")+"); runs unpacked, auto and fixed packs of 5, 10 and 20")
	fl.Float64Var(&f.opt.PositionBias, "position-bias", 0, "pack: error rate of a packed answer's last entry (position i of k wrong, but valid, with probability p·i/(k-1)), in [0, 1]")
	fl.IntVar(&f.opt.KillAt, "kill-at", 0, "provider-batch: SIGKILL the run once the endpoint has that many batches, then resume it")
	fl.Float64Var(&f.opt.TimeScale, "time-scale", 0, fmt.Sprintf("agentic: scale of every duration (tool latencies, the simulator's steps; 0: %g)", bench.DefaultAgenticTimeScale))
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	fl.StringVar(&f.traceFile, "trace", "", "write an execution trace to this file")
	return cmd
}

// benchFlags are the flags of `batchagent bench`.
type benchFlags struct {
	opt                   bench.Options
	cpuProfile, traceFile string
}

// benchCmd runs a bench scenario: `batchagent bench fair --json`.
func benchCmd(ctx context.Context, scenario string, f benchFlags, stdout, stderr io.Writer) int {
	opt := f.opt
	cpuProfile, traceFile := f.cpuProfile, f.traceFile
	if opt.Backend != "" {
		opt.APIKey = llm.Secret(environ("OPENAI_API_KEY"))
	}
	stopProfiles, err := bench.StartProfiles(cpuProfile, traceFile)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent bench:", err)
		return exitUsage
	}
	defer stopProfiles()
	if _, err := bench.Run(ctx, scenario, opt, stdout); err != nil {
		fmt.Fprintln(stderr, "batchagent bench:", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitUsage
	}
	return exitOK
}
