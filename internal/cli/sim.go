package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
)

// shutdownGrace is how long `sim serve` lets in-flight requests finish
// after a stop signal before it closes their connections.
const shutdownGrace = 5 * time.Second

const simUsage = `Usage: batchagent sim serve [flags]

Serves the simulator as an OpenAI-compatible chat-completions server
(POST /v1/chat/completions, GET /v1/models, /metrics, /health) whose timing
models a continuous-batching GPU server (vLLM-like): a running batch of
--max-seqs sequences, a waiting queue of --max-queue requests (then 429),
chunked prefill of the uncached prompt tokens, and a prefix cache.

Flags:
`

func simCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, simUsage)
			return exitOK
		}
		fmt.Fprint(stderr, simUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("sim serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage)
		fs.PrintDefaults()
	}
	var (
		cfg       sim.ServerConfig
		addr      string
		toolTurns int
		apiKeyEnv string
		fault     string
		verbose   bool
	)
	fs.StringVar(&addr, "addr", "127.0.0.1:8000", "address to listen on (port 0: any free port)")
	fs.IntVar(&cfg.MaxSeqs, "max-seqs", sim.DefaultMaxSeqs, "sequences in the running batch")
	fs.IntVar(&cfg.MaxQueue, "max-queue", sim.DefaultMaxQueue, "requests that may wait for a slot before the server answers 429 (negative: unbounded)")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", sim.DefaultPrefillPerToken, "prefill time per uncached prompt token")
	fs.DurationVar(&cfg.DecodeStep, "decode-step", sim.DefaultDecodeStep, "time of a decode step with a batch of one")
	fs.DurationVar(&cfg.DecodeStepPerSeq, "decode-step-per-seq", sim.DefaultDecodeStepPerSeq, "extra step time per sequence in the batch")
	fs.BoolVar(&cfg.NoPrefixCache, "no-prefix-cache", false, "turn the prefix cache off")
	fs.IntVar(&cfg.ContextWindow, "context-window", sim.DefaultContextWindow, "context window in tokens")
	fs.StringVar(&cfg.ModelName, "model", sim.DefaultModelName, "model name to list and answer as")
	fs.Uint64Var(&cfg.Model.Seed, "seed", 0, "simulator seed")
	fs.IntVar(&toolTurns, "tool-turns", sim.DefaultToolTurns, "turns that call tools before the model answers (0: never)")
	fs.Float64Var(&cfg.Model.InvalidRate, "invalid", 0, "share of answers that violate the output schema")
	fs.Float64Var(&cfg.Model.FailRate, "fail", 0, "share of requests answered 503")
	fs.StringVar(&apiKeyEnv, "api-key-env", "", "environment variable holding the API key requests must carry (default: no key)")
	fs.StringVar(&fault, "fault", "", "fault injected into every request: rate_limited, overloaded, server_error, bad_request, stream_cut, malformed")
	fs.DurationVar(&cfg.FaultAfter, "fault-after", 0, "inject --fault only into requests that arrive this long after the start")
	fs.DurationVar(&cfg.FaultFor, "fault-for", 0, "inject --fault for this long from --fault-after, then serve normally (0: forever)")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", 0, "wait the rate_limited and overloaded faults ask for (0: 1s for rate_limited, none for overloaded)")
	fs.BoolVar(&verbose, "v", false, "log every request")
	pos, err := parse(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "batchagent sim serve: unexpected arguments %q\n", pos)
		return exitUsage
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || !validPort(port) {
		fmt.Fprintf(stderr, "batchagent sim serve: --addr %q: want HOST:PORT\n", addr)
		return exitUsage
	}
	cfg.Model.ToolTurns = toolTurns
	if toolTurns == 0 {
		cfg.Model.ToolTurns = -1 // an explicit 0: never call tools
	}
	cfg.Fault = sim.Fault(fault)
	if apiKeyEnv != "" {
		if cfg.APIKey = os.Getenv(apiKeyEnv); cfg.APIKey == "" {
			fmt.Fprintf(stderr, "batchagent sim serve: --api-key-env %s: the variable is empty or unset\n", apiKeyEnv)
			return exitUsage
		}
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	s, err := sim.NewServer(cfg)
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
	if err := serveSim(ctx, s, ln); err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitFailed
	}
	return exitOK
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

// serveSim serves s on ln until ctx is done, then shuts the HTTP server
// down (in-flight requests get shutdownGrace to finish) and stops the
// scheduler. It returns only once both have stopped.
func serveSim(ctx context.Context, s *sim.Server, ln net.Listener) error {
	// The scheduler outlives ctx so that in-flight requests can finish
	// during the graceful shutdown.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	ran := make(chan error, 1) // Run's result
	go func() { ran <- s.Run(runCtx) }()

	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1) // Serve's result
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close() // grace is over: cut the remaining connections
	}
	if serveErr == nil {
		serveErr = <-served
	}
	stopRun()
	runErr := <-ran
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, runErr)
}
