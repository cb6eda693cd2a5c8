package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/progress"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/reduce"
	"github.com/batchagent/batchagent/tool"
)

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
	f.onResult = chainResults(tel.OnResult(), ui.onResult())
	r, err := prepare(ctx, path, f, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	defer func() { _ = r.close() }() // a no-op once run has closed and reported
	for _, m := range r.moved {
		fmt.Fprintf(stderr, "batchagent run: --restart: moved %s to %s\n", m.From, m.To)
	}
	if err := tel.WatchCost(r.name, r.cost()); err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitFailed
	}
	runCtx, err := tel.Serve(ctx, r.name, r.engine)
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
	code := r.run(runCtx, f.quiet, stderr)
	// The last sample, where the run ended before its results (a no-op
	// once run has taken it), while the state file is open.
	if err := ui.stopSampling(); err != nil {
		fmt.Fprintln(stderr, "batchagent run: warning:", err)
	}
	if code != exitInterrupted { // an interrupt stops the live view too
		ui.linger(ctx, f.quiet, stderr)
	}
	return code
}

// runner is a prepared `batchagent run`: engine, inputs and output.
type runner struct {
	name    string
	engine  *batchagent.Engine
	inputs  batchagent.Inputs
	total   int // inputs expected, 0 if unknown
	out     *outfile.Writer
	outPath string
	closers []namedCloser   // closed in order by close
	locks   []namedCloser   // the output's and state file's locks, released after closers
	tools   *config.ToolSet // closed with the runner
	// sharedTools, when set, is the cache of tool results the job's tool
	// pool shares with other processes (a worker's, in Redis); nil: none.
	sharedTools tool.Cache
	// toolsErr is what closing the tools reported (an MCP server's exit
	// status, say): a warning, not the run's failure.
	toolsErr error

	backendAddr  string          // the backend as scheme://host:port, for messages
	statePath    string          // the checkpoint store, or ""
	saved        *outfile.Store  // the checkpoint store as the engine sees it, or nil
	resumedLines int             // result lines kept in the output on resume
	moved        []outfile.Aside // the files of an earlier run that --restart moved aside

	spec      *batchagent.Spec // the job; the runner holds it while the engine runs it
	reduce    *reduce.Config   // nil: no reduce step
	reduceOut string           // where the reduce output goes; "" for stdout
	stdout    io.Writer
	// limitSource says where the limit on model calls in flight comes
	// from, for the summary.
	limitSource string
	// price is what the job's tokens cost, for the lines, the progress
	// line and the summary.
	price estimate.Price
	// onEnd, when set, is called once every result is in, before the
	// state file closes: the live view's last sample.
	onEnd func()
}

// namedCloser is a file the runner closes, with what it is for errors.
type namedCloser struct {
	name string // "inputs", "state", "output"
	c    io.Closer
}

// close closes what the runner opened, once, and returns the errors met,
// each labelled with what failed.
func (r *runner) close() error {
	var errs []error
	for _, nc := range r.closers {
		if err := nc.c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nc.name, err))
		}
	}
	r.closers = nil
	for _, nc := range r.locks {
		if err := nc.c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nc.name, err))
		}
	}
	r.locks = nil
	if r.tools != nil {
		// Not the run's failure: its results are written by now.
		r.toolsErr = r.tools.Close()
		r.tools = nil
	}
	return errors.Join(errs...)
}

// run streams results to the output and reports progress and a summary.
func (r *runner) run(ctx context.Context, quiet bool, stderr io.Writer) int {
	start := time.Now()
	var rep *progress.Display
	if !quiet {
		rep = startReporter(r.engine, r.total, stderr, r.price)
	}
	var (
		notWritten int
		writeErr   error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var interrupted atomic.Bool
	stopSignals := r.handleSignals(&interrupted, stderr)
	var outputs []json.RawMessage // for the reduce step
	var unavailable error         // why the engine stopped: the backend never answered
	results, err := r.engine.Stream(runCtx, r.spec, r.inputs)
	if err != nil {
		stopSignals()
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitFailed
	}
	for res := range results {
		if errors.Is(res.Err, batchagent.ErrBackendUnavailable) && batchagent.KindOf(res.Err) == batchagent.KindCanceled {
			// Stopped before the backend ever answered: pending, resumable.
			notWritten++
			if ae, ok := errors.AsType[*batchagent.AgentError](res.Err); ok && unavailable == nil {
				unavailable = ae.Err
			}
			continue
		}
		if r.reduce != nil && res.Err == nil {
			outputs = append(outputs, res.Output)
		}
		if errors.Is(res.Err, batchagent.ErrCheckpoint) {
			notWritten++ // its state could not be saved: not written, resume reruns it
			continue
		}
		if batchagent.KindOf(res.Err) == batchagent.KindCanceled && (interrupted.Load() || ctx.Err() != nil || r.saveFailed()) {
			notWritten++ // stopped mid-flight: not a result, resume reruns it
			continue
		}
		if err := r.out.Write(res); err != nil && writeErr == nil {
			writeErr = err
			cancel()
		}
	}
	if rep != nil {
		rep.Stop() // before the reduce step, which prints too
	}
	if r.onEnd != nil {
		r.onEnd()
	}
	if err := r.out.Close(); err != nil && writeErr == nil {
		writeErr = err
	}
	if err := r.saveError(); err != nil && writeErr == nil {
		writeErr = err
	}
	var reduceErr error
	if r.reduce != nil && writeErr == nil && unavailable == nil && !interrupted.Load() && ctx.Err() == nil {
		reduceErr = r.runReduce(runCtx, outputs, quiet, stderr)
	}
	stopSignals()
	if err := r.close(); err != nil && writeErr == nil {
		writeErr = err
	}
	if r.toolsErr != nil {
		fmt.Fprintln(stderr, "batchagent run: closing tools:", r.toolsErr)
	}
	st := r.engine.Stats()
	if !quiet {
		writeSummary(stderr, r.name, st, time.Since(start), notWritten, r.out.Written(), r.outPath, r.limitSource)
		fmt.Fprintf(stderr, "  %s\n", r.price.Summary(st.Usage))
		if r.statePath != "" {
			fmt.Fprintf(stderr, "  state: %s", r.statePath)
			if r.resumedLines > 0 {
				fmt.Fprintf(stderr, " (resumed: %d results were already in the output)", r.resumedLines)
			}
			if notWritten > 0 || ctx.Err() != nil || interrupted.Load() {
				fmt.Fprint(stderr, "; run the same command again to resume")
			}
			fmt.Fprintln(stderr)
		}
	}
	switch {
	case writeErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", writeErr)
		return exitFailed
	case unavailable != nil:
		pending := max(r.total-r.resumedLines-r.out.Written(), notWritten)
		next := "run again to resume"
		if r.statePath == "" {
			next = "no state file: run again to run them"
		}
		fmt.Fprintf(stderr, "batchagent run: backend unreachable: %s: %v (%d inputs left pending; %s)\n", r.backendAddr, unavailable, pending, next)
		return exitFailed
	case reduceErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", reduceErr)
		if ctx.Err() != nil || interrupted.Load() {
			return exitInterrupted
		}
		return exitFailed
	case ctx.Err() != nil || interrupted.Load():
		return exitInterrupted
	case st.Failed > 0:
		return exitFailed
	}
	return exitOK
}

// cost reads the cost of the run so far and its projection, as the
// progress line shows them; nil when the job's price is not known.
func (r *runner) cost() func() telemetry.Cost {
	if !r.price.Known {
		return nil
	}
	return func() telemetry.Cost {
		spent, projected, ok := r.price.Projection(r.engine.Stats(), r.total)
		return telemetry.Cost{Spent: spent, Projected: projected, Projecting: ok}
	}
}
