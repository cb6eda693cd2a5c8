package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/sink"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/reduce"
)

// runFlags are the flags of `batchagent run`.
type runFlags struct {
	inputs, out, backend, state string
	ordered, quiet              bool
	force, retryFailed, noState bool
	logger                      *slog.Logger // the engine's; nil: silent
}

// runJob runs the job file at path with the flags f: `batchagent run`.
func runJob(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) int {
	r, err := prepare(ctx, path, f, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	defer func() { _ = r.close() }() // a no-op once run has closed and reported
	return r.run(ctx, f.quiet, stderr)
}

// runner is a prepared `batchagent run`: engine, inputs and output.
type runner struct {
	name    string
	engine  *batchagent.Engine
	inputs  batchagent.Inputs
	total   int // inputs expected, 0 if unknown
	out     *sink.JSONL
	outPath string
	closers []namedCloser // closed in order by close
	locks   []namedCloser // the output's and state file's locks, released after closers
	tools   *builtTools   // closed with the runner
	// toolsErr is what closing the tools reported (an MCP server's exit
	// status, say): a warning, not the run's failure.
	toolsErr error

	backendAddr  string      // the backend as scheme://host:port, for messages
	statePath    string      // the checkpoint store, or ""
	saved        *savedStore // the checkpoint store as the engine sees it, or nil
	resumedLines int         // result lines kept in the output on resume

	spec      *batchagent.Spec // the job; the runner holds it while the engine runs it
	reduce    *reduce.Config   // nil: no reduce step
	reduceOut string           // where the reduce output goes; "" for stdout
	stdout    io.Writer
	// limitSource says where the limit on model calls in flight comes
	// from, for the summary.
	limitSource string
}

// namedCloser is a file the runner closes, with what it is for errors.
type namedCloser struct {
	name string // "inputs", "state", "output"
	c    io.Closer
}

// prepare loads the job file and opens everything the run needs. Every
// error it returns is a usage error (exit status 2). The checkpoint store
// is opened, and the run recorded in it, only once every other step that
// can fail has passed, so that a failed invocation leaves no run record
// behind (and no state file, where it created one).
func prepare(ctx context.Context, path string, f runFlags, stdout io.Writer) (*runner, error) {
	cj, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	r := &runner{name: cj.Def.ID}
	if r.name == "" {
		r.name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	ok := false
	newState := "" // a state file this invocation creates: removed if it fails
	defer func() {
		if !ok {
			_ = r.close() // the setup error is the one to report
			if newState != "" {
				removeState(newState)
			}
		}
	}()
	backend := cj.Backend
	if f.backend != "" {
		backend = f.backend
	}
	r.backendAddr = backendAddr(backend)
	model, err := openBackend(ctx, backend, cj.Def.ModelName, cj.APIKeyEnv, environ)
	if err != nil {
		return nil, err
	}
	tools, err := buildTools(ctx, cj)
	if err != nil {
		return nil, err
	}
	r.tools = tools
	// The file holds the job and the engine's settings; what it cannot
	// hold is added here: the model, the tools, the logger, the token
	// counter and (below) the checkpoint.
	def := cj.Def
	def.ID, def.Model, def.Tools = r.name, model, tools.tools
	def.ToolPool.Policies = tools.policies
	cfg := cj.Engine
	cfg.Logger = f.logger
	if _, hosted := model.(llm.Capable); hosted || cfg.Admission.RateLimit.TPM > 0 {
		// Token pacing (configured, or learnt from the backend's headers)
		// needs real token counts.
		counter, err := tokens.New(def.ModelName)
		if err != nil {
			return nil, err
		}
		cfg.Admission.RateLimit.CountTokens = counter.Count
	}
	if r.spec, err = batchagent.NewSpec(def); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.outPath = cj.Output
	if f.out != "" {
		r.outPath = f.out
	}
	if r.outPath == "-" {
		r.outPath = ""
	}
	r.stdout = stdout
	if red := cj.Reduce; red != nil {
		rc := red.Config
		r.reduce = &rc
		r.reduceOut = red.Output
		if r.reduceOut == "" && r.outPath != "" {
			r.reduceOut = strings.TrimSuffix(r.outPath, filepath.Ext(r.outPath)) + ".reduce.json"
		}
	}

	inPath := cj.Inputs
	if f.inputs != "" {
		inPath = f.inputs
	}
	if inPath == "" {
		return nil, fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", path)
	}
	if r.inputs, r.total, err = r.openInputs(inPath); err != nil {
		return nil, err
	}
	if err := checkPlaceholders(path, def.Task, inPath); err != nil {
		return nil, err
	}

	statePath := f.state
	if statePath == "" && r.outPath != "" && !f.noState {
		statePath = r.outPath + ".state.db"
	}
	if err := r.lockRun(path, statePath); err != nil {
		return nil, err
	}
	var store *checkpoint.Store
	if statePath != "" {
		if _, err := os.Stat(statePath); errors.Is(err, os.ErrNotExist) {
			newState = statePath
		}
		if store, err = checkpoint.Open(statePath, checkpoint.Config{}); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		r.closers = append(r.closers, namedCloser{"state", store})
		r.saved = &savedStore{Store: store}
		cfg.Checkpoint, cfg.RetryFailed, cfg.StopOnCheckpointError = r.saved, f.retryFailed, true
		r.statePath = statePath
	}
	if r.engine, err = batchagent.New(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.limitSource = concurrencySource(backend, model, cfg.Admission.MaxInflight)
	id := r.spec.ID()

	// Nothing but the output can fail from here: record the run.
	resumed := false
	if store != nil {
		fp := r.spec.Fingerprint()
		fp["backend"] = checkpoint.Digest([]byte(backend)) // its query may hold a key
		if resumed, err = store.Begin(ctx, id, fp, f.force); err != nil {
			return nil, fmt.Errorf("%s: %w", statePath, err)
		}
		if r.total > 0 {
			// For `batchagent status`: inputs without a state are pending.
			if err := store.SetInputs(ctx, id, r.total); err != nil {
				return nil, fmt.Errorf("%s: %w", statePath, err)
			}
		}
	}

	var plan *outputPlan // a resumed run's: which lines of the output stay
	var states []agent.State
	if store != nil {
		if states, err = r.saved.loadSaved(ctx, id, statePath); err != nil {
			return nil, err
		}
	}
	if resumed {
		chk, err := checkInputs(inPath, states)
		if err != nil {
			return nil, err
		}
		if chk.first >= 0 && !f.force {
			return nil, chk.err(inPath, statePath)
		}
		plan = newOutputPlan(states, chk, f.ordered, f.retryFailed)
	}
	var (
		w       io.Writer = stdout
		written map[int]bool
	)
	if r.outPath != "" {
		of, idx, err := openOutput(r.outPath, plan)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		r.closers = append(r.closers, namedCloser{"output", of})
		w, written = of, idx
	}
	if plan != nil {
		// Their lines are gone: discard the states of changed inputs too.
		if err := r.saved.forget(ctx, id, plan.drop); err != nil {
			return nil, fmt.Errorf("%s: %w", statePath, err)
		}
	}
	r.out = sink.NewJSONL(w, f.ordered)
	r.out.Skip(written)
	r.resumedLines = len(written)
	ok = true
	return r, nil
}

// removeState removes a state file and SQLite's files beside it.
func removeState(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(p) // best effort: the invocation is failing already
	}
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
		r.toolsErr = r.tools.close()
		r.tools = nil
	}
	return errors.Join(errs...)
}

// run streams results to the output and reports progress and a summary.
func (r *runner) run(ctx context.Context, quiet bool, stderr io.Writer) int {
	start := time.Now()
	var rep *reporter
	if !quiet {
		rep = startReporter(r.engine, r.total, stderr)
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
		rep.stop() // before the reduce step, which prints too
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
