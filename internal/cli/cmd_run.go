package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/telemetry"
)

func (a *app) runCommand() *cobra.Command {
	var f runFlags
	var bf batchFlags
	rf := redisFlags{window: defaultWindow}
	cmd := &cobra.Command{
		Use:   "run JOB.yaml [flags]",
		Short: "Run one agent per input of a job file",
		Long: `Run one agent per input of JOB.yaml (inputs .jsonl, .csv or .json); write
one result per input to --out (.jsonl: a JSON line; .csv or .parquet: a row;
default: the job's output, else stdout) and show progress and a summary on
stderr. With --out FILE the run is checkpointed (FILE.state.db): the same
command run again resumes where it stopped.
Ctrl-C finishes the turns in flight and stops (exit 130); a second stops
at once. Exit status: 0 all ok, 1 some failed, 2 bad job or flags.
Details of every flag: docs/cli.md; of --dry-run: 'batchagent help dry-run'.`,
		Example: `  batchagent run examples/review/job.yaml --out /tmp/review.jsonl
  batchagent run job.yaml --inputs items.csv --out results.jsonl
  batchagent run job.yaml --dry-run
  batchagent run job.yaml --out results.jsonl --retry-failed`,
		Args: func(cmd *cobra.Command, args []string) error {
			if bf.input != "" {
				return exactArgs(0, "no job file with --openai-batch")(cmd, args)
			}
			return exactArgs(1, "exactly one job file")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRestart(f, rf, bf); err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			if err := checkDryRunFlags(f, cmd.Flags().Changed); err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			if f.dryRun {
				f.Logger = a.logger
				return withSignals(cmd.Context(), func(ctx context.Context) int { return runDryRun(ctx, args[0], f, a.stdout, a.stderr) })
			}
			if err := checkRedisFlags(rf, cmd.Flags().Changed); err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			if err := f.ui.check(cmd.Flags().Changed); err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			if f.ui.addr != "" && (rf.url != "" || bf.input != "") {
				other := "--redis"
				if bf.input != "" {
					other = "--openai-batch"
				}
				return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("--ui and %s contradict each other (the live view draws a job run in this process): drop one", other)}
			}
			if rf.url != "" {
				f.Logger = a.logger
				return exitWith(runCoordinator(cmd.Context(), args[0], f, rf, a.stderr))
			}
			if bf.input != "" {
				bf.out, bf.backend, bf.quiet = f.Out, f.Backend, f.quiet
				return withSignals(cmd.Context(), func(ctx context.Context) int {
					return runOpenAIBatch(ctx, bf, a.logger, a.stderr)
				})
			}
			if err := f.check(cmd.Flags().Changed("state")); err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			f.Logger = a.logger
			// run stops in two phases and handles its signals itself.
			return exitWith(runJob(cmd.Context(), args[0], f, a.stdout, a.stderr))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Inputs, "inputs", "", "inputs `FILE`: .jsonl .csv .json (default: job's)")
	fl.StringVar(&f.Out, "out", "", "results `FILE`: .jsonl .csv .parquet (default: job's)")
	fl.StringVar(&f.Backend, "backend", "", "backend `URL`, e.g. sim://?latency=60ms")
	fl.BoolVar(&f.Ordered, "ordered", false, "write results in input order")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress or summary on stderr")
	fl.StringVar(&f.State, "state", "", "checkpoint `FILE` (default OUT.state.db)")
	fl.BoolVar(&f.NoState, "no-state", false, "no checkpoint (no resume)")
	fl.BoolVar(&f.Force, "force", false, "resume though the job or inputs changed")
	fl.BoolVar(&f.RetryFailed, "retry-failed", false, "on resume, run the failed inputs again")
	fl.BoolVar(&f.Restart, "restart", false, "start afresh, moving OUT and state to OUT.1")
	fl.BoolVar(&f.NoCache, "no-cache", false, "answer no model call from the response cache")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics")
	fl.StringVar(&f.ui.addr, "ui", "", "serve a live view at http://`ADDR`/ during the run")
	fl.BoolVar(&f.ui.public, "ui-public", false, "with --ui: allow an address beyond loopback")
	fl.DurationVar(&f.ui.linger, "ui-linger", 0, "with --ui: keep the view up this long after the run")
	fl.BoolVar(&f.traceContent, "trace-content", false, "record prompts and answers in trace spans")
	fl.StringVar(&bf.input, "openai-batch", "", "run an OpenAI Batch API input `FILE` instead")
	fl.StringVar(&bf.config, "config", "", "with --openai-batch: serve config for its models")
	fl.StringVar(&bf.state, "batch-state", "", "with --openai-batch: store `DIR` (default OUT.batch)")
	fl.StringVar(&rf.url, "redis", "", "spread the run over the workers of this Redis `URL`")
	fl.StringVar(&rf.runID, "run-id", "", "with --redis: the run's ID (default: derived)")
	fl.IntVar(&rf.window, "window", rf.window, "with --redis: most inputs in flight")
	fl.BoolVar(&f.dryRun, "dry-run", false, "estimate calls, tokens and cost; run nothing")
	fl.IntVar(&f.sample, "sample", 0, "with --dry-run: run `K` inputs for real and scale")
	fl.BoolVar(&f.jsonOut, "json", false, "with --dry-run: print the estimate as JSON")
	return cmd
}

// runFlags are the flags of `batchagent run`: the run's Options and the
// command's own.
type runFlags struct {
	jobrun.Options
	quiet           bool
	metricsAddr     string  // --metrics-addr: where to serve /metrics; "": nowhere
	traceContent    bool    // --trace-content: prompt and answer text in spans
	ui              uiFlags // --ui, --ui-public, --ui-linger: the live view
	dryRun, jsonOut bool    // --dry-run, --json: estimate, run nothing (dryrun.go)
	sample          int     // --sample K: with --dry-run, inputs run for real
}

// checkRestart rejects --restart with a flag it contradicts, naming both:
// a fresh run does not resume (--force, --retry-failed), and a dry run, a
// run over Redis or an OpenAI batch file keep no output of this kind.
func checkRestart(f runFlags, rf redisFlags, bf batchFlags) error {
	if !f.Restart {
		return nil
	}
	switch {
	case f.Force:
		return errors.New("--restart and --force contradict each other (--force resumes the run, rerunning the results that changed; --restart starts a fresh one): drop one")
	case f.RetryFailed:
		return errors.New("--restart and --retry-failed contradict each other (--retry-failed resumes the run, rerunning its failures; --restart runs every input afresh): drop one")
	case f.dryRun:
		return errors.New("--dry-run and --restart contradict each other: a dry run writes no output or state and runs nothing; drop one")
	case rf.url != "":
		return errors.New("--redis and --restart contradict each other (a run over Redis resumes from Redis: give another --run-id or --out to start afresh): drop one")
	case bf.input != "":
		return errors.New("--openai-batch and --restart contradict each other (an OpenAI batch file resumes from its --batch-state: give another --out to start afresh): drop one")
	}
	return nil
}

// check rejects contradictory flags, naming both. stateSet says whether
// --state was given (even as an empty string).
func (f runFlags) check(stateSet bool) error {
	if !f.NoState {
		return nil
	}
	switch {
	case stateSet:
		return fmt.Errorf("--state %q and --no-state contradict each other: drop one", f.State)
	case f.RetryFailed:
		return fmt.Errorf("--retry-failed needs a state file to find the failed inputs, and --no-state turns it off: drop one")
	case f.Force:
		return fmt.Errorf("--force resumes from a state file, and --no-state turns it off: drop one")
	}
	return nil
}

// runJob runs the job file at path with the flags f: `batchagent run`.
func runJob(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) int {
	tel, err := telemetry.StartRun(ctx, telemetry.RunOptions{MetricsAddr: f.metricsAddr, TraceContent: f.traceContent})
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	defer func() {
		if err := tel.Stop(ctx); err != nil {
			fmt.Fprintln(stderr, "batchagent run: warning:", err)
		}
	}()
	ui, err := startUI(ctx, f.ui) // --ui and the samples of the state file: see ui.go
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	defer func() {
		if err := ui.stop(); err != nil {
			fmt.Fprintln(stderr, "batchagent run: warning:", err)
		}
	}()
	f.OnResult = chainResults(tel.OnResult(), ui.onResult())
	r, err := jobrun.Open(ctx, path, f.Options, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	defer func() { _ = r.Close() }() // a no-op once run has closed and reported
	for _, m := range r.Moved() {
		fmt.Fprintf(stderr, "batchagent run: --restart: moved %s to %s\n", m.From, m.To)
	}
	if err := tel.WatchCost(r.Name(), r.Cost()); err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitFailed
	}
	runCtx, err := tel.Serve(ctx, r.Name(), r.Engine())
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitFailed
	}
	if a := tel.MetricsAddr(); a != nil && !f.quiet {
		fmt.Fprintf(stderr, "batchagent run: metrics at http://%s/metrics\n", a)
	}
	if err := ui.start(ctx, r, f.quiet, stderr); err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitFailed
	}
	code := r.Run(runCtx, f.quiet, stderr)
	// The last sample, where the run ended before its results (a no-op
	// once run has taken it), while the state file is open.
	if err := ui.stopSampling(); err != nil {
		fmt.Fprintln(stderr, "batchagent run: warning:", err)
	}
	if code != jobrun.Interrupted { // an interrupt stops the live view too
		ui.linger(ctx, f.quiet, stderr)
	}
	return int(code)
}

// dryRunTopic is `batchagent help dry-run`: a help topic (no command of
// its own) holding what --dry-run counts and how, which would not fit on
// the screen of `run --help`.
func dryRunTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "dry-run",
		Short: "What 'run --dry-run' counts, and how it estimates",
		Long:  strings.TrimPrefix(dryRunHelp, "\n"),
	}
}
