package jobrun

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
	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/respcache"
	"github.com/batchagent/batchagent/router"
	"github.com/batchagent/batchagent/tool"
)

// Job is a job file opened as a run opens it: its backend's model, its
// tools and the Spec the engine runs. A run, a dry run and a worker all
// open their job with OpenJob, so that the three agree on what a job
// file means. Close closes its tools.
type Job struct {
	Name    string      // the job's name: see Name
	File    *config.Job // the parsed job file
	Backend string      // the backend URL the model was opened from
	Addr    string      // the backend as scheme://host:port, for messages
	Model   llm.Model
	Tools   *config.ToolSet
	Spec    *batchagent.Spec
	Price   estimate.Price // what the job's tokens cost
	// Cap is the job's spend cap, limits.max_cost, which every model call
	// of the Spec (its fallback tiers' too) reserves against; nil when the
	// file sets none. Model is the backend's model unwrapped.
	Cap *spend.Cap
	// Media reads the media of the task's image, audio and file items;
	// nil for a text-only task. It closes with the job.
	Media *media.Loader
	// Cache answers the model's calls asked before, in this run or an
	// earlier one; Model is wrapped by it. Nil when the cache is off. It
	// closes with the job.
	Cache *respcache.Cache

	// Router spreads the calls over the job's deployments (the file's
	// backend.deployments); nil for one backend URL. Model wraps it.
	Router *router.Router

	closeModel io.Closer    // the backend's Model, when it must be closed
	logger     *slog.Logger // receives each deployment's calls on Close; nil: none
}

// JobOptions are what OpenJob takes beyond the job file.
type JobOptions struct {
	// Name names the job; "": Name(path, file).
	Name string
	// Backend replaces the job file's backend URL (the --backend flag);
	// "": the file's. Fallback tiers keep their own backends.
	Backend string
	// SharedTools, when set, is the cache of tool results the job's tool
	// pool shares with other processes (a worker's, in Redis).
	SharedTools tool.Cache
	// NoCache turns the response cache off (--no-cache, a dry run).
	NoCache bool
	// Journal is the file where a batch-delivered job's backend records
	// its submissions (see batchmode.Config.Journal); "": in memory.
	Journal string
	// Logger receives a batch-delivered backend's log; nil: none.
	Logger *slog.Logger
	// SharedCache, when set, is the store the response cache keeps its
	// answers in instead of a SQLite file: a worker's, in Redis, shared
	// with the other workers.
	SharedCache respcache.Store
}

// Name names the job of the file at path: the file's id, else the file's
// name without its extension.
func Name(path string, cj *config.Job) string {
	if cj.Def.ID != "" {
		return cj.Def.ID
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// OpenJob opens the job file cj, read from path, for a run: its backend's
// model, its tools and its Spec, with what the file cannot hold added: the
// job's name, the models of its fallback tiers (each backend opened as the
// job's own), the context window of a well-known model from the built-in
// table when the file sets none, the response cache (see openCache), the tools with their policies, and the
// budget of a job that sets none: BATCHAGENT_BUDGET's when set (the
// file's limits.budget wins over it; the engine's default applies without
// either). Errors name the job file at path. On error, what was opened is
// closed.
func OpenJob(ctx context.Context, path string, cj *config.Job, o JobOptions) (_ *Job, err error) {
	j := &Job{Name: o.Name, File: cj, Backend: cj.Backend}
	if j.Name == "" {
		j.Name = Name(path, cj)
	}
	if o.Backend != "" {
		j.Backend = o.Backend
	}
	j.Price = estimate.PriceFor(cj, j.Backend)
	j.Addr = config.BackendAddr(j.Backend)
	WarnUnpriced(cj, j.Price, o.Logger)
	if cj.MaxCost > 0 {
		if err := checkCapPrices(path, cj, j.Price); err != nil {
			return nil, err
		}
		if j.Cap, err = spend.New(cj.MaxCost); err != nil {
			return nil, fmt.Errorf("%s: limits.max_cost: %w", path, err)
		}
	}
	if o.Backend == "" && len(cj.Deployments) > 0 {
		// Several deployments of the model, as the gateway's: the engine
		// admits calls to the router as to one backend.
		if j.Router, err = config.OpenDeployments(ctx, cj.Deployments, cj.Def.ModelName, cj.Cooldown, os.Getenv); err != nil {
			return nil, fmt.Errorf("%s: backend.%w", path, err)
		}
		j.Model, j.logger = j.Router, o.Logger
		if o.Logger != nil {
			o.Logger.Info("backend: "+config.DeploymentsLine(cj.Deployments), "job", j.Name)
		}
	} else if j.Model, err = config.OpenBackendWith(ctx, j.Backend, cj.Def.ModelName, cj.APIKeyEnv, os.Getenv,
		config.BackendOptions{Delivery: cj.Delivery, Journal: o.Journal, Logger: o.Logger}); err != nil {
		return nil, err
	}
	if c, ok := j.Model.(io.Closer); ok { // a batch-delivered backend: it stops its pollers
		j.closeModel = c
		defer func() {
			if err != nil {
				_ = c.Close() // the setup error is the one to report
			}
		}()
	}
	if j.Cache, err = openCache(cj, j.Model, o.NoCache, o.SharedCache, os.Getenv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if j.Cache != nil {
		j.Model = j.Cache.Wrap(j.Model)
		defer func() {
			if err != nil {
				_ = j.Cache.Close() // the setup error is the one to report
			}
		}()
	}
	if j.Tools, err = cj.OpenTools(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = j.Tools.Close() // the setup error is the one to report
		}
	}()
	if len(cj.Def.Media) > 0 {
		mc := cj.Media
		if mc == nil { // a Job built by hand: the file's default
			mc = &config.MediaConfig{Roots: []string{cj.Dir}}
		}
		if j.Media, err = media.NewLoader(media.LoaderConfig{Roots: mc.Roots, MaxBytes: mc.MaxBytes, Fetch: mc.Fetch, PassURLs: mc.PassURLs}); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer func() {
			if err != nil {
				_ = j.Media.Close() // the setup error is the one to report
			}
		}()
	}
	def := cj.Def
	def.ID, def.Model, def.Tools = j.Name, j.Model, j.Tools.Tools
	if j.Cap != nil {
		def.Model = j.Cap.Model(j.Model, j.Price.Price)
	}
	if j.Media != nil {
		def.MediaLoader = j.Media
	}
	def.ToolPool.Policies = j.Tools.Policies
	def.ToolPool.Shared = o.SharedTools
	config.TableWindow(&def)
	if def.Fallbacks, err = config.OpenFallbacks(ctx, cj.Fallbacks, os.Getenv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if j.Cap != nil {
		for i := range def.Fallbacks {
			if fb := &def.Fallbacks[i]; fb.Model != nil {
				fb.Model = j.Cap.Model(fb.Model, fallbackPrice(cj, fb.ModelName))
			}
		}
	}
	if def.Budget == 0 {
		if def.Budget, err = batchagent.BudgetFrom(os.Getenv); err != nil {
			return nil, err
		}
	}
	if j.Spec, err = batchagent.NewSpec(def); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j, nil
}

// EngineConfig returns the engine's settings from the job file, with what
// the file cannot hold added: logger and, where token pacing (configured,
// or learnt from a hosted backend's headers) needs them, real token
// counts for the job's model. A run adds its checkpoint store.
func (j *Job) EngineConfig(logger *slog.Logger) (batchagent.Config, error) {
	cfg := j.File.Engine
	cfg.Logger = logger
	if j.Router != nil {
		cfg.Admission = config.RouterAdmission(cfg.Admission, j.Router)
	}
	if _, batch := j.closeModel.(*batchmode.Model); batch && cfg.MaxActive == 0 {
		// Each agent waits in a batch for hours: as many as a batch holds
		// wait at once, not the engine's default.
		cfg.MaxActive = batchmode.DefaultConcurrency
	}
	if j.Cache != nil {
		cfg.ResponseCache = j.Cache // its hits in the engine's Stats
	}
	c, hosted := j.Model.(llm.Capable)
	hosted = hosted && !c.Capabilities().InProcess
	if hosted || cfg.Admission.RateLimit.TPM > 0 {
		counter, err := tokens.New(j.File.Def.ModelName)
		if err != nil {
			return batchagent.Config{}, err
		}
		cfg.Admission.RateLimit.CountTokens = counter.Count
	}
	return cfg, nil
}

// Close closes the job's tools (an MCP server's exit status is what it
// may report), its media loader and its response cache, and logs the calls
// of each of its deployments (their requests, failures and breaker state).
func (j *Job) Close() error {
	err := j.Tools.Close()
	if j.Media != nil {
		err = errors.Join(err, j.Media.Close())
	}
	if j.Cache != nil {
		err = errors.Join(err, j.Cache.Close())
	}
	if j.closeModel != nil {
		err = errors.Join(err, j.closeModel.Close())
	}
	if j.Router != nil && j.logger != nil {
		for _, st := range j.Router.Stats() {
			j.logger.Info("deployment", "job", j.Name, "deployment", st.Name, "requests", st.Requests,
				"failures", st.Failures, "breaker", st.State)
		}
	}
	return err
}

// checkCapPrices returns the error of a job with limits.max_cost whose
// model, or a fallback tier's, has no known price: the cap could not be
// kept. price is the job's model's.
func checkCapPrices(path string, cj *config.Job, price estimate.Price) error {
	if !price.Known {
		return fmt.Errorf("%s: limits.max_cost is set but model %q has no known price: set pricing: {input: ..., output: ...} (dollars per million tokens) in the job file, or remove limits.max_cost", path, cj.Def.ModelName)
	}
	for i, f := range cj.Fallbacks {
		if _, ok := fallbackKnown(cj, f.Model); !ok {
			return fmt.Errorf("%s: limits.max_cost is set but fallbacks[%d]'s model %q has no known price: the job file's pricing prices only the job's model %q; use a fallback model in the built-in price table, or remove limits.max_cost", path, i, f.Model, cj.Def.ModelName)
		}
	}
	return nil
}

// WarnUnpriced logs, once per model per process (prices.Warn), that the
// job's model or a fallback tier's has no known price, so its cost is not
// counted; price is the job's model's (estimate.PriceOf). Models left
// unnamed (the backend's default) are not named. OpenJob calls it; a
// coordinator, which opens no job, calls it itself.
func WarnUnpriced(cj *config.Job, price estimate.Price, log *slog.Logger) {
	if !price.Known && cj.Def.ModelName != "" {
		prices.Warn(log, cj.Def.ModelName, "the job file's pricing: {input: ..., output: ...}")
	}
	for _, f := range cj.Fallbacks {
		if _, ok := fallbackKnown(cj, f.Model); !ok && f.Model != "" {
			prices.Warn(log, f.Model, "the job file's pricing, which prices the job's model only: a fallback tier needs a model the built-in table prices")
		}
	}
}

// fallbackPrice returns the price of a fallback tier's model: the job
// file's pricing when it is the job's model, else the built-in table's
// (checkCapPrices made sure it is known).
func fallbackPrice(cj *config.Job, model string) llm.Price {
	p, _ := fallbackKnown(cj, model)
	return p
}

// fallbackKnown returns the price of a fallback tier's model and whether
// it is known.
func fallbackKnown(cj *config.Job, model string) (llm.Price, bool) {
	if cj.Pricing != nil && model == cj.Def.ModelName {
		return *cj.Pricing, true
	}
	return prices.Lookup(model)
}
