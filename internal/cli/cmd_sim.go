package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

func (a *app) simCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulator tools: serve the simulator as an OpenAI-compatible server",
		Long: `Simulator tools. "batchagent sim serve" serves the deterministic simulator as
an OpenAI-compatible chat-completions server whose timing models a
continuous-batching GPU server (vLLM-like), for tests and benchmarks without
a GPU.`,
		Example: `  batchagent sim serve --addr 127.0.0.1:8000 --max-seqs 16
  batchagent run job.yaml --backend openai+http://127.0.0.1:8000/v1`,
		// A command of its own, so that "sim bogus" is an error and "sim"
		// alone prints its help.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("unknown command %q (known: serve)", args[0])}
			}
			return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("want a command: serve")}
		},
	}
	cmd.AddCommand(a.simServeCommand())
	return cmd
}

func (a *app) simServeCommand() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve the simulator as an OpenAI-compatible chat-completions server",
		Long: `Serve the simulator as an OpenAI-compatible chat-completions server
(POST /v1/chat/completions, GET /v1/models, /metrics, /health) whose timing
models a continuous-batching GPU server (vLLM-like): a running batch of
--max-seqs sequences, a waiting queue of --max-queue requests (then 429),
chunked prefill of the uncached prompt tokens, and a prefix cache in a KV
cache of --kv-cache-tokens tokens (least recently used blocks evicted;
counters on /metrics). It also serves OpenAI's Batch API (/v1/files,
/v1/batches; backend sim+http://HOST:PORT?mode=batch): each line is
answered as a chat completion outside --rpm and --tpm, and a batch
completes no sooner than --batch-delay after its creation; GET
/sim/batch/stats counts batches, lines and duplicate_submissions
(custom_ids submitted in more than one batch). It runs
until SIGINT or SIGTERM, then lets requests in flight finish.

--profile names a kind of server whose settings the other flags then
adjust: cached-slots (16 sequences and a prefix cache, the defaults),
one-slot (one sequence, no prefix cache, 150ms a call before the prefill,
like a local server) or rpm-limited (a hosted API: 256 sequences, 600
requests and 2,000,000 tokens a minute).`,
		Example: `  batchagent sim serve --addr 127.0.0.1:0 --seed 7 --tool-turns 0
  batchagent sim serve --fault rate_limited --log-level debug
  batchagent sim serve --profile one-slot --position-bias 0.1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := a.logger
			if f.verbose {
				l, err := newLogger("debug", a.logFormat, a.stderr)
				if err != nil {
					return &usageError{cmd: cmd.CommandPath(), err: err}
				}
				logger = l
			}
			if f.profile != "" {
				if err := f.applyProfile(cmd.Flags().Changed); err != nil {
					return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("--profile: %w", err)}
				}
			}
			return withSignals(cmd.Context(), func(ctx context.Context) int {
				return simServe(ctx, f, logger, a.stderr)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8000", "address to listen on (port 0: any free port)")
	fl.IntVar(&f.cfg.MaxSeqs, "max-seqs", simhttp.DefaultMaxSeqs, "sequences in the running batch")
	fl.IntVar(&f.cfg.MaxQueue, "max-queue", simhttp.DefaultMaxQueue, "requests that may wait for a slot before the server answers 429 (negative: unbounded)")
	fl.DurationVar(&f.cfg.PrefillPerToken, "prefill-per-token", simhttp.DefaultPrefillPerToken, "prefill time per uncached prompt token")
	fl.DurationVar(&f.cfg.DecodeStep, "decode-step", simhttp.DefaultDecodeStep, "time of a decode step with a batch of one")
	fl.DurationVar(&f.cfg.DecodeStepPerSeq, "decode-step-per-seq", simhttp.DefaultDecodeStepPerSeq, "extra step time per sequence in the batch")
	fl.BoolVar(&f.cfg.NoPrefixCache, "no-prefix-cache", false, "turn the prefix cache off")
	fl.DurationVar(&f.cfg.CallOverhead, "call-overhead", 0, "time each request costs the server before its prefill (a local server's per-call setup); the running batch waits for it")
	fl.StringVar(&f.profile, "profile", "", "server profile the other flags adjust: "+strings.Join(simhttp.Profiles, ", ")+" (default: the flags' defaults, as cached-slots)")
	fl.Float64Var(&f.cfg.Model.PositionBias, "position-bias", 0, "error rate of a packed answer's last entry: the entry at position i of k is a valid but wrong answer with probability p·i/(k-1)")
	fl.IntVar(&f.cfg.KVCacheTokens, "kv-cache-tokens", 0, "KV cache size in tokens: prefix blocks are evicted least recently used when a new sequence needs room (0: 1,048,576)")
	fl.IntVar(&f.cfg.ContextWindow, "context-window", simhttp.DefaultContextWindow, "context window in tokens")
	fl.StringVar(&f.cfg.ModelName, "model", simhttp.DefaultModelName, "model name to list and answer as")
	fl.Uint64Var(&f.cfg.Model.Seed, "seed", 0, "simulator seed")
	fl.IntVar(&f.toolTurns, "tool-turns", sim.DefaultToolTurns, "turns that call tools before the model answers (0: never)")
	fl.Float64Var(&f.cfg.Model.InvalidRate, "invalid", 0, "share of answers that violate the output schema")
	fl.Float64Var(&f.cfg.Model.CorruptRate, "corrupt", 0, "share of packed answers' entries corrupted (missing, duplicated, under an unknown id, or invalid)")
	fl.Float64Var(&f.cfg.Model.FailRate, "fail", 0, "share of requests answered 503")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key requests must carry (default: no key)")
	fl.StringVar(&f.fault, "fault", "", "fault injected into every request: rate_limited, overloaded, server_error, bad_request, stream_cut, malformed")
	fl.DurationVar(&f.cfg.FaultAfter, "fault-after", 0, "inject --fault only into requests that arrive this long after the start")
	fl.DurationVar(&f.cfg.FaultFor, "fault-for", 0, "inject --fault for this long from --fault-after, then serve normally (0: forever)")
	fl.DurationVar(&f.cfg.RetryAfter, "retry-after", 0, "wait the rate_limited and overloaded faults ask for (0: 1s for rate_limited, none for overloaded)")
	fl.IntVar(&f.cfg.RPM, "rpm", 0, "requests per minute the server enforces as a hosted API does: 429 with Retry-After when over, x-ratelimit-* headers on every answer (0: no limit)")
	fl.IntVar(&f.cfg.TPM, "tpm", 0, "tokens (prompt and completion) per minute the server enforces, like --rpm (0: no limit)")
	fl.DurationVar(&f.cfg.BatchDelay, "batch-delay", time.Second, "least time a batch of the Batch API (/v1/files, /v1/batches) takes from its creation to its completion, as a provider's takes hours; the batch counts are at /sim/batch/stats")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log every request (same as --log-level debug)")
	return cmd
}

// simFlags are the flags of `batchagent sim serve`.
type simFlags struct {
	cfg       simhttp.Config
	addr      string
	toolTurns int
	apiKeyEnv string
	fault     string
	verbose   bool
	profile   string
}

// applyProfile sets the settings of f.profile that no flag set
// (changed reports whether a flag was given).
func (f *simFlags) applyProfile(changed func(string) bool) error {
	p, err := simhttp.Profile(f.profile)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		flag string
		set  func()
	}{
		{"max-seqs", func() { f.cfg.MaxSeqs = p.MaxSeqs }},
		{"max-queue", func() { f.cfg.MaxQueue = p.MaxQueue }},
		{"no-prefix-cache", func() { f.cfg.NoPrefixCache = p.NoPrefixCache }},
		{"call-overhead", func() { f.cfg.CallOverhead = p.CallOverhead }},
		{"rpm", func() { f.cfg.RPM = p.RPM }},
		{"tpm", func() { f.cfg.TPM = p.TPM }},
	} {
		if !changed(s.flag) {
			s.set()
		}
	}
	return nil
}

// simServe serves the HTTP simulator until ctx is done: `batchagent sim
// serve`. logger is the global one; --v lowers its level to Debug.
func simServe(ctx context.Context, f simFlags, logger *slog.Logger, stderr io.Writer) int {
	cfg, addr, toolTurns, apiKeyEnv, fault := f.cfg, f.addr, f.toolTurns, f.apiKeyEnv, f.fault
	if _, port, err := net.SplitHostPort(addr); err != nil || !validPort(port) {
		fmt.Fprintf(stderr, "batchagent sim serve: --addr %q: want HOST:PORT\n", addr)
		return exitUsage
	}
	cfg.Model.ToolTurns = toolTurns
	if toolTurns == 0 {
		cfg.Model.ToolTurns = -1 // an explicit 0: never call tools
	}
	cfg.Fault = simhttp.Fault(fault)
	if apiKeyEnv != "" {
		if cfg.APIKey = os.Getenv(apiKeyEnv); cfg.APIKey == "" {
			fmt.Fprintf(stderr, "batchagent sim serve: --api-key-env %s: the variable is empty or unset\n", apiKeyEnv)
			return exitUsage
		}
	}
	cfg.Batch = true
	cfg.Logger = logger
	s, err := simhttp.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "listening on http://%s\n", ln.Addr())
	if err := simhttp.Serve(ctx, s, ln); err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitFailed
	}
	return exitOK
}
