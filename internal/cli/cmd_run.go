package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

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
		Long: `Run the job file JOB.yaml: one agent per input (a .jsonl file with one JSON
object per line, or a .csv file with a header row), one JSON result per line
on --out (default: the job's output, else stdout), a progress display and a
summary on stderr.

With an output file, progress is checkpointed in a SQLite state file
(OUT.state.db unless --state names another): running the same command again
resumes, keeping the finished inputs and continuing the unfinished agents.
A resume whose job (model, system, task, schema, tools, sampling), backend
URL or inputs changed is refused: --force runs again every result made by
the old job or from a changed input (a new backend URL alone keeps them),
and --restart starts a fresh run, moving the old output and state file
aside to OUT.1 and STATE.1 (the next free number). --out and --state may not name a file the run reads (inputs, job
file, schema file) or each other.
The first SIGINT or SIGTERM finishes the turns in flight and stops; a second
stops at once.

With a known price (the job file's pricing, else the built-in table) the
progress line shows the cost so far and, once results come in, the
projected total: the cost so far per result times the inputs to run.
--metrics-addr serves Prometheus metrics while the job runs, the cost as
batchagent_cost_dollars and batchagent_cost_projected_dollars. Traces go to an
OpenTelemetry collector when the standard OTEL_* variables name one
(OTEL_EXPORTER_OTLP_ENDPOINT): the run, each turn, model call and tool call.

--ui ADDR serves a live view of the run at http://ADDR/: the charts of
'batchagent report' and the counters, updated every second by server-sent
events. It stays up after the run, showing the final state, until SIGINT or
SIGTERM (or for --ui-linger). ADDR must be a loopback address unless
--ui-public is given. With a state file, the run records its counters there
once a second, for the report's charts over time.

With --redis URL the process is the coordinator of a run spread over the
workers ('batchagent worker') reading that Redis: it enqueues the inputs (at
most --window without a result) and writes each recorded result into the
output once; the same command run again resumes. The checkpoints are kept
in Redis, so --state, --no-state, --force, --restart, --ordered and
--backend do not apply; --retry-failed runs the failures recorded in Redis
again.
` + dryRunHelp,
		Example: `  batchagent run examples/review/job.yaml
  batchagent run job.yaml --inputs items.jsonl --out results.jsonl --backend 'sim://?latency=60ms'
  batchagent run job.yaml --out results.jsonl --retry-failed
  batchagent run job.yaml --dry-run --sample 5
  batchagent run job.yaml --inputs items.jsonl --out results.jsonl --redis redis://127.0.0.1:6379
  batchagent run --openai-batch requests.jsonl --out results.jsonl --backend 'sim://?latency=60ms'`,
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
	fl.StringVar(&f.Inputs, "inputs", "", "input file, .jsonl (one JSON object per line) or .csv (header row); overrides the job's inputs")
	fl.StringVar(&f.Out, "out", "", "output file for JSONL results (default: the job's output, else stdout; - for stdout)")
	fl.StringVar(&f.Backend, "backend", "", "backend URL, e.g. sim://?latency=60ms or openai+http://host:8000/v1?model=m; overrides the job's backend")
	fl.BoolVar(&f.Ordered, "ordered", false, "write results in input order (buffers results that finish early)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress or summary on stderr")
	fl.StringVar(&f.State, "state", "", "checkpoint store (SQLite); default OUT.state.db when --out is a file. Re-running resumes: finished inputs are kept, unfinished agents continue")
	fl.BoolVar(&f.NoState, "no-state", false, "no checkpoint store (no resume)")
	fl.BoolVar(&f.Force, "force", false, "resume even though the job, its backend URL or its inputs changed since the state was written: the results of the old job and of changed inputs run again")
	fl.BoolVar(&f.RetryFailed, "retry-failed", false, "on resume, run the inputs that failed again, replacing their lines in the output")
	fl.BoolVar(&f.Restart, "restart", false, "start a fresh run on the same output: the output and the state file (and the reduce output) are first moved aside to OUT.1, STATE.1 (the next free number), never deleted")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics while the job runs, e.g. 127.0.0.1:9464 (keep it on loopback)")
	fl.StringVar(&f.ui.addr, "ui", "", "serve a live view of the run at http://ADDR/, e.g. 127.0.0.1:8080; it ends with the run (see --ui-linger)")
	fl.BoolVar(&f.ui.public, "ui-public", false, "with --ui: allow an address beyond loopback (:8080, 0.0.0.0:8080, a LAN IP)")
	fl.DurationVar(&f.ui.linger, "ui-linger", 0, "with --ui: keep the live view up this long after the run ends, e.g. 30s (default 0: exit with the run)")
	fl.BoolVar(&f.traceContent, "trace-content", false, "with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT set), record prompts, answers and tool arguments in spans, 4 KiB each at most")
	fl.StringVar(&bf.input, "openai-batch", "", "run a file in OpenAI's batch format (custom_id, method, url, body per line) instead of a job: every line's result on --out in OpenAI's output line format, input order; models through --backend, or the backends and agents of --config; resumable (state in --batch-state, default OUT.batch)")
	fl.StringVar(&bf.config, "config", "", "with --openai-batch: a serve config file whose backends and agents answer the lines' models")
	fl.StringVar(&bf.state, "batch-state", "", "with --openai-batch: the batch's store directory (default OUT.batch)")
	fl.StringVar(&rf.url, "redis", "", "spread the run over the workers reading this Redis (redis://[:password@]host:port[/db] or rediss://): this process enqueues the inputs and writes the results; resumable")
	fl.StringVar(&rf.runID, "run-id", "", "with --redis: the run's ID (default: derived from the job file's path and content, the inputs' path and the output's)")
	fl.IntVar(&rf.window, "window", rf.window, "with --redis: inputs enqueued without a result at most")
	fl.BoolVar(&f.dryRun, "dry-run", false, "run nothing: check every input line, count the prompts' tokens and estimate the calls, tokens and cost (see above)")
	fl.IntVar(&f.sample, "sample", 0, "with --dry-run: run K inputs, evenly spread, for real (nothing written) and scale their calls, tokens and cost")
	fl.BoolVar(&f.jsonOut, "json", false, "with --dry-run: print the estimate as one JSON object")
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
