package jobrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/outfile"
)

// Options are the settings of a run beyond its job file: the flags of
// `batchagent run`.
type Options struct {
	Inputs  string // the inputs file; "": the job file's
	Out     string // the output file; "": the job file's, "-": stdout
	Backend string // the backend URL; "": the job file's
	State   string // the checkpoint store; "": OUT.state.db beside an output file
	NoState bool   // no checkpoint store (no resume)
	// Restart moves the output and the state file aside to numbered names
	// and runs afresh.
	Restart bool
	// Force resumes although the job, its backend URL or its inputs
	// changed: the results of the old job and of changed inputs run again.
	Force bool
	// RetryFailed runs the inputs that failed again on resume.
	RetryFailed bool
	// NoCache turns the response cache off: every model call is paid.
	NoCache  bool
	Ordered  bool                    // write results in input order
	Logger   *slog.Logger            // the engine's; nil: silent
	OnResult batchagent.OnResultFunc // the engine's OnResult; nil: none
}

// Open loads the job file at path and opens everything its run needs;
// results that go to stdout are written to stdout. Every error it returns
// is a usage error (exit status 2). The checkpoint store is opened, and
// the run recorded in it, only once every other step that can fail has
// passed, so that a failed invocation leaves no run record behind (and no
// state file, where it created one). The caller runs it with Run, which
// closes it; Close closes a Run that is not run.
func Open(ctx context.Context, path string, o Options, stdout io.Writer) (*Run, error) {
	cj, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	r := &Run{name: Name(path, cj), stdout: stdout, price: estimate.PriceOf(cj)}
	r.chooseOutputs(cj, o.Out)
	inPath := inputsPathOf(cj, o.Inputs)
	statePath := stateFileOf(o, r.outPath)
	// Before anything is opened, for writing or not.
	if err := outfile.CheckFiles(r.writes(o, statePath), Reads(path, cj, inPath)); err != nil {
		return nil, err
	}
	ok := false
	newState := "" // a state file this invocation creates: removed if it fails
	defer func() {
		if !ok {
			_ = r.Close() // the setup error is the one to report
			if newState != "" {
				removeState(newState)
			}
		}
	}()
	jo := JobOptions{Name: r.name, Backend: o.Backend, NoCache: o.NoCache, Logger: o.Logger}
	if statePath != "" {
		// Beside the state file, and not moved aside with it by
		// --restart: its answers and running batches stay valid.
		jo.Journal = statePath + ".batches"
	}
	j, err := OpenJob(ctx, path, cj, jo)
	if err != nil {
		return nil, err
	}
	if j.closeModel != nil {
		r.closers = append(r.closers, namedCloser{"backend", j.closeModel})
	}
	r.tools, r.spec, r.backendAddr, r.cap, r.price, r.router = j.Tools, j.Spec, j.Addr, j.Cap, j.Price, j.Router
	if j.Media != nil {
		r.closers = append(r.closers, namedCloser{"media", j.Media})
	}
	if j.Cache != nil {
		r.cache, r.tallies = j.Cache, newCacheTallies()
		r.closers = append(r.closers, namedCloser{"cache", j.Cache})
	}
	cfg, err := j.EngineConfig(o.Logger)
	if err != nil {
		return nil, err
	}
	cfg.OnResult = o.OnResult // the run's metrics, if any
	if err := r.openJobInputs(path, cj, inPath); err != nil {
		return nil, err
	}

	if err := r.lockRun(path, statePath); err != nil {
		return nil, err
	}
	if o.Restart {
		// Under the locks: no other run is writing them.
		if r.moved, err = outfile.MoveAside(r.outPath, statePath, r.reduceOut); err != nil {
			return nil, err
		}
	}
	if statePath != "" {
		if _, err := os.Stat(statePath); errors.Is(err, os.ErrNotExist) {
			newState = statePath
		}
	}
	if err := r.openStore(statePath, o.RetryFailed, &cfg); err != nil {
		return nil, err
	}
	if r.engine, err = batchagent.New(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.limitSource = config.ConcurrencySource(j.Backend, j.Model, cfg.Admission.MaxInflight)
	if j.Router != nil && cfg.Admission.MaxInflight == j.Router.MaxInflight() {
		r.limitSource = fmt.Sprintf("max %d: the deployments' max_inflight, summed", cfg.Admission.MaxInflight)
	}

	// Nothing but the output can fail from here: record the run.
	resumed, err := r.beginRun(ctx, j.Backend, o.Force)
	if err != nil {
		return nil, err
	}
	plan, err := r.planOutput(ctx, inPath, resumed, o)
	if err != nil {
		return nil, err
	}
	if err := r.openResults(ctx, plan, o.Ordered, cj.Def.OutputSchema); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}
