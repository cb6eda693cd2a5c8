package jobrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/progress"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/reduce"
	"github.com/batchagent/batchagent/respcache"
	"github.com/batchagent/batchagent/router"
)

// Run is a prepared run of a job file, `batchagent run`: engine, inputs
// and output, opened by Open. Run runs it once.
type Run struct {
	name    string
	engine  *batchagent.Engine
	inputs  batchagent.Inputs
	inPath  string // the inputs file, for the lines of media errors
	total   int    // inputs expected, 0 if unknown
	out     *outfile.Writer
	outPath string
	closers []namedCloser   // closed in order by close
	locks   []namedCloser   // the output's and state file's locks, released after closers
	tools   *config.ToolSet // closed with the run
	// toolsErr is what closing the tools reported (an MCP server's exit
	// status, say): a warning, not the run's failure.
	toolsErr error

	backendAddr  string          // the backend as scheme://host:port, for messages
	statePath    string          // the checkpoint store, or ""
	saved        *outfile.Store  // the checkpoint store as the engine sees it, or nil
	resumedLines int             // result lines kept in the output on resume
	moved        []outfile.Aside // the files of an earlier run that --restart moved aside

	spec      *batchagent.Spec // the job; the run holds it while the engine runs it
	reduce    *reduce.Config   // nil: no reduce step
	reduceOut string           // where the reduce output goes; "" for stdout
	stdout    io.Writer
	// limitSource says where the limit on model calls in flight comes
	// from, for the summary.
	limitSource string
	// price is what the job's tokens cost, for the lines, the progress
	// line and the summary.
	price estimate.Price
	// cap is the job's spend cap (limits.max_cost); nil for none.
	cap *spend.Cap
	// onEnd, when set, is called once every result is in, before the
	// state file closes: the live view's last sample.
	onEnd func()
	// cache answers the calls asked before; nil when off.
	cache *respcache.Cache
	// tallies count each agent's cached calls; nil without a cache.
	tallies *cacheTallies
	// router spreads the calls over the job's deployments, for the
	// summary; nil for one backend URL.
	router *router.Router
}

// namedCloser is a file the run closes, with what it is for errors.
type namedCloser struct {
	name string // "inputs", "state", "output"
	c    io.Closer
}

// Close closes what the run opened, once, and returns the errors met,
// each labelled with what failed. Run closes the run; Close is for one
// that is not run, and a no-op after Run.
func (r *Run) Close() error {
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

// Status is how a run ended: the exit status of `batchagent run`.
type Status int

const (
	OK          Status = 0   // every input has a result, and none failed
	Failed      Status = 1   // inputs failed, an I/O failure, or the backend never answered
	Interrupted Status = 130 // stopped by a signal or ctx; run again to resume
)

// Run streams the results to the output and, unless quiet, reports
// progress and a summary on stderr; the first SIGINT or SIGTERM finishes
// the turns in flight and stops, a second stops at once. It closes the
// run.
func (r *Run) Run(ctx context.Context, quiet bool, stderr io.Writer) Status {
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
	capped := 0                   // agents stopped by the spend cap: pending
	tallies := r.tallies          // each agent's cached calls; nil without a cache
	streamCtx := runCtx
	if tallies != nil {
		tallies.next = agent.ObserverFrom(runCtx)
		streamCtx = agent.WithObserver(runCtx, tallies)
	}
	results, err := r.engine.Stream(streamCtx, r.spec, r.inputs)
	if err != nil {
		stopSignals()
		fmt.Fprintln(stderr, "batchagent run:", err)
		return Failed
	}
	lines := newLineTable(r.inPath) // read once, at the first failed media load
	for res := range results {
		if errors.Is(res.Err, spend.ErrCapReached) && batchagent.KindOf(res.Err) == batchagent.KindCanceled {
			// Its next call would have passed the spend cap: pending,
			// resumable with a higher cap.
			notWritten++
			capped++
			continue
		}
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
		res.Err = withInputLine(res.Err, lines, res.Index)
		if tallies != nil {
			tallies.fill(&res)
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
	if r.reduce != nil && writeErr == nil && unavailable == nil && capped == 0 && !interrupted.Load() && ctx.Err() == nil {
		reduceErr = r.runReduce(runCtx, outputs, quiet, stderr)
	}
	stopSignals()
	if err := r.Close(); err != nil && writeErr == nil {
		writeErr = err
	}
	if r.toolsErr != nil {
		fmt.Fprintln(stderr, "batchagent run: closing tools:", r.toolsErr)
	}
	st := r.engine.Stats()
	if !quiet {
		state := r.statePath
		if state != "" && r.resumedLines > 0 {
			state += fmt.Sprintf(" (resumed: %d results were already in the output)", r.resumedLines)
		}
		if state != "" && (notWritten > 0 || ctx.Err() != nil || interrupted.Load()) {
			state += "; run the same command again to resume"
		}
		s := summary{name: r.name, st: st, wall: time.Since(start), notWritten: notWritten, written: r.out.Written(),
			outPath: r.outPath, limitSource: r.limitSource, cost: strings.TrimPrefix(r.price.Summary(st.Usage), "cost: "), state: state,
			cache: r.cacheSummary(), deployments: deploymentsRow(r.router)}
		if capped > 0 {
			s.capped, s.spendCap = capped, r.capStopped(notWritten)
		}
		writeSummary(stderr, s)
	}
	switch {
	case writeErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", writeErr)
		return Failed
	case unavailable != nil:
		pending := max(r.total-r.resumedLines-r.out.Written(), notWritten)
		next := "run again to resume"
		if r.statePath == "" {
			next = "no state file: run again to run them"
		}
		fmt.Fprintf(stderr, "batchagent run: backend unreachable: %s: %v (%d inputs left pending; %s)\n", r.backendAddr, unavailable, pending, next)
		return Failed
	case capped > 0:
		fmt.Fprintln(stderr, "batchagent run:", r.capStopped(notWritten))
		return Failed
	case reduceErr != nil:
		fmt.Fprintln(stderr, "batchagent run:", reduceErr)
		if ctx.Err() != nil || interrupted.Load() {
			return Interrupted
		}
		return Failed
	case ctx.Err() != nil || interrupted.Load():
		return Interrupted
	case st.Failed > 0:
		return Failed
	}
	return OK
}

// capStopped says that the spend cap stopped the run, notWritten being
// the results not written.
func (r *Run) capStopped(notWritten int) string {
	pending := notWritten
	if r.total > 0 {
		pending = max(r.total-r.resumedLines-r.out.Written(), notWritten)
	}
	next := "resume with a higher limits.max_cost"
	if r.statePath == "" {
		next = "no state file: run again with a higher limits.max_cost to run them"
	}
	return fmt.Sprintf("stopped at the spend cap: $%.4f spent of $%.4f; %d inputs pending — %s", r.cap.Spent(), r.cap.Limit(), pending, next)
}

// Cost reads the cost of the run so far and its projection, as the
// progress line shows them; nil when the job's price is not known.
func (r *Run) Cost() func() telemetry.Cost {
	if !r.price.Known {
		return nil
	}
	return func() telemetry.Cost {
		spent, projected, ok := r.price.Projection(r.engine.Stats(), r.total)
		return telemetry.Cost{Spent: spent, Projected: projected, Projecting: ok}
	}
}

// cacheSummary is the summary's cache row, "" without a cache.
func (r *Run) cacheSummary() string {
	if r.cache == nil {
		return ""
	}
	return cacheLine(r.cache.Stats(), func(u llm.Usage) (float64, bool) {
		return r.price.Price.Cost(u), r.price.Known
	})
}

// Cache is the run's response cache, nil when off.
func (r *Run) Cache() *respcache.Cache { return r.cache }

// Name is the job's name.
func (r *Run) Name() string { return r.name }

// Engine is the engine that runs the job.
func (r *Run) Engine() *batchagent.Engine { return r.engine }

// Total is the number of inputs, 0 if unknown.
func (r *Run) Total() int { return r.total }

// Price is what the job's tokens cost.
func (r *Run) Price() estimate.Price { return r.price }

// Moved is the files of an earlier run that Options.Restart moved aside.
func (r *Run) Moved() []outfile.Aside { return r.moved }

// OnEnd sets f to be called once every result is in, before the state
// file closes (the live view's last sample). Set it before Run.
func (r *Run) OnEnd(f func()) { r.onEnd = f }

// SamplePersist returns the live view's sampler's PersistFunc, recording
// into the run's state file; nil without one.
func (r *Run) SamplePersist() report.PersistFunc {
	if r.saved == nil {
		return nil
	}
	id := r.spec.ID()
	return func(ctx context.Context, at time.Time, data json.RawMessage) error {
		return r.saved.AddSample(ctx, id, checkpoint.Sample{At: at, Data: data})
	}
}
