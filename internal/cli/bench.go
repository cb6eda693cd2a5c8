package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/batchagent/batchagent/internal/bench"
	"github.com/batchagent/batchagent/llm"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: batchagent bench fair|slots|scale|server|dedup [flags]\n       batchagent bench live --backend URL [--model NAME] [--max-tokens N] [flags]\n\nScenarios are defined in BENCHMARKS.md; each runs the engine and a naive baseline.\nlive runs them against a real OpenAI-compatible server (API key: $OPENAI_API_KEY, if set).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var opt bench.Options
	var modes stringList
	fs.IntVar(&opt.N, "n", 0, "number of agents (0: the scenario's default)")
	fs.Float64Var(&opt.Fail, "fail", 0, "share of model calls that fail transiently")
	fs.Uint64Var(&opt.Seed, "seed", 1, "simulator seed")
	fs.BoolVar(&opt.JSON, "json", false, "print one JSON object per mode")
	fs.Var(&modes, "mode", "modes to run, comma-separated: engine,naive (dedup: cache,coalesce,batch); default all")
	fs.BoolVar(&opt.State, "state", false, "also run the engine with a SQLite checkpoint store (mode engine+state)")
	fs.IntVar(&opt.Count, "count", 1, "run each mode this many times, in rounds, and report each mode's run of median throughput")
	fs.StringVar(&opt.Dir, "dir", "", "directory for the scenario's files (default: a temporary one)")
	fs.StringVar(&opt.Backend, "backend", "", "live: the server's URL (openai+http://HOST:PORT/v1, ollama://HOST:PORT, vllm://...)")
	fs.StringVar(&opt.Model, "model", "", "live: model name, when the URL names none")
	fs.IntVar(&opt.MaxTokens, "max-tokens", 0, fmt.Sprintf("live: cap on each answer's tokens (0: %d)", bench.DefaultLiveMaxTokens))
	var cpuProfile, traceFile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	fs.StringVar(&traceFile, "trace", "", "write an execution trace to this file")
	pos, err := parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	opt.Modes = modes
	if opt.Backend != "" {
		opt.APIKey = llm.Secret(environ("OPENAI_API_KEY"))
	}
	stopProfiles, err := startProfiles(cpuProfile, traceFile)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent:", err)
		return exitUsage
	}
	defer stopProfiles()
	if _, err := bench.Run(ctx, pos[0], opt, stdout); err != nil {
		fmt.Fprintln(stderr, "batchagent:", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitUsage
	}
	return exitOK
}

// startProfiles starts a CPU profile and an execution trace when their
// file names are set, and returns the function that stops and writes them.
func startProfiles(cpuProfile, traceFile string) (func(), error) {
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err != nil {
			stop()
			return func() {}, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return func() {}, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}
