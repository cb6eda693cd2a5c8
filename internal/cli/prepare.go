package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
)

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
	r := &runner{name: jobName(path, cj), stdout: stdout, price: estimate.PriceOf(cj)}
	r.chooseOutputs(cj, f.out)
	inPath := inputsPathOf(cj, f.inputs)
	statePath := stateFileOf(f, r.outPath)
	// Before anything is opened, for writing or not.
	if err := outfile.CheckFiles(r.writes(f, statePath), jobReads(path, cj, inPath)); err != nil {
		return nil, err
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
	backend, model, err := r.openModel(ctx, cj, f.backend)
	if err != nil {
		return nil, err
	}
	if r.tools, err = cj.OpenTools(ctx); err != nil {
		return nil, err
	}
	cfg, err := engineConfig(cj, model, f.logger)
	if err != nil {
		return nil, err
	}
	cfg.OnResult = f.onResult // the run's metrics, if any
	if r.spec, err = r.buildSpec(ctx, path, cj, model); err != nil {
		return nil, err
	}
	if err := r.openJobInputs(path, cj, inPath); err != nil {
		return nil, err
	}

	if err := r.lockRun(path, statePath); err != nil {
		return nil, err
	}
	if f.restart {
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
	if err := r.openStore(statePath, f.retryFailed, &cfg); err != nil {
		return nil, err
	}
	if r.engine, err = batchagent.New(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.limitSource = config.ConcurrencySource(backend, model, cfg.Admission.MaxInflight)

	// Nothing but the output can fail from here: record the run.
	resumed, err := r.beginRun(ctx, backend, f.force)
	if err != nil {
		return nil, err
	}
	plan, err := r.planOutput(ctx, inPath, resumed, f)
	if err != nil {
		return nil, err
	}
	if err := r.openResults(ctx, plan, f.ordered); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

// jobName names the job: the job file's id, else the file's name without
// its extension.
func jobName(path string, cj *config.Job) string {
	if cj.Def.ID != "" {
		return cj.Def.ID
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// openModel opens the run's backend, the --backend flag's URL, else
// the job file's, as the job's model. It returns the URL with the model,
// and keeps its address in r for messages.
func (r *runner) openModel(ctx context.Context, cj *config.Job, flag string) (string, llm.Model, error) {
	backend := cj.Backend
	if flag != "" {
		backend = flag
	}
	r.backendAddr = config.BackendAddr(backend)
	model, err := config.OpenBackend(ctx, backend, cj.Def.ModelName, cj.APIKeyEnv, environ)
	if err != nil {
		return "", nil, err
	}
	return backend, model, nil
}

// engineConfig returns the engine's settings from the job file cj, with
// what the file cannot hold added: the logger and, where token pacing
// (configured, or learnt from a hosted backend's headers) needs them, real
// token counts for model. The checkpoint store is added by openStore.
func engineConfig(cj *config.Job, model llm.Model, logger *slog.Logger) (batchagent.Config, error) {
	cfg := cj.Engine
	cfg.Logger = logger
	if _, hosted := model.(llm.Capable); hosted || cfg.Admission.RateLimit.TPM > 0 {
		// Token pacing (configured, or learnt from the backend's headers)
		// needs real token counts.
		counter, err := tokens.New(cj.Def.ModelName)
		if err != nil {
			return batchagent.Config{}, err
		}
		cfg.Admission.RateLimit.CountTokens = counter.Count
	}
	return cfg, nil
}

// buildSpec builds the job's Spec from the job file cj, with what the file
// cannot hold added: the job's name, the model, the models of its fallback
// tiers (each backend opened as the job's own; the --backend flag replaces
// only the job's), the context window of a well-known model from the
// built-in table when the file sets none, r's tools with their policies, and the budget of a job
// that sets none: BATCHAGENT_BUDGET's when set (the file's limits.budget
// wins over it; the engine's default applies without either). Errors name
// the job file at path.
func (r *runner) buildSpec(ctx context.Context, path string, cj *config.Job, model llm.Model) (*batchagent.Spec, error) {
	def := cj.Def
	def.ID, def.Model, def.Tools = r.name, model, r.tools.Tools
	def.ToolPool.Policies = r.tools.Policies
	def.ToolPool.Shared = r.sharedTools // a worker's: tool results shared through Redis
	config.TableWindow(&def)
	var err error
	if def.Fallbacks, err = config.OpenFallbacks(ctx, cj.Fallbacks, environ); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if def.Budget == 0 {
		b, err := batchagent.BudgetFrom(environ)
		if err != nil {
			return nil, err
		}
		def.Budget = b
	}
	spec, err := batchagent.NewSpec(def)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}
