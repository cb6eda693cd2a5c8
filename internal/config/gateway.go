package config

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/router"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
)

// DrainGrace is how long a drain lets the requests begun finish:
// shutdown_grace, else request_timeout, else the server's default of it.
func (sc *Serve) DrainGrace() time.Duration {
	return cmp.Or(sc.ShutdownGrace, sc.RequestTimeout, server.DefaultRequestTimeout)
}

// Gateway is a serve config opened: the server and what must be closed
// after it (the agents' tools, the tracing).
type Gateway struct {
	// Server serves the gateway, and the Batch API where Open was given a
	// store. Shut it down before Close.
	Server        *server.Server
	tools         []*ToolSet
	shutdownTrace func(context.Context) error // flushes the traces; nil before tracing is set up
}

// Close closes the agents' tools and flushes the traces.
func (g *Gateway) Close() {
	for _, t := range g.tools {
		_ = t.Close() // nothing to report on the way out
	}
	if g.shutdownTrace != nil {
		ctx, cancel := context.WithTimeout(context.Background(), telemetry.StopTimeout)
		defer cancel()
		_ = g.shutdownTrace(ctx) // the exporter's failures were logged by the SDK
	}
}

// Open opens the backends of sc, builds its agents and keys, and
// returns the gateway on a new engine, serving the Batch API from store
// (nil: not served). An agent whose backend URL and
// model equal a served backend's shares its Model, and so its admission.
// getenv reads the environment (backend and API keys).
func (sc *Serve) Open(ctx context.Context, store *batchapi.Store, logger *slog.Logger, getenv func(string) string) (_ *Gateway, err error) {
	g := &Gateway{}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	type opened struct {
		url, model string
		m          llm.Model
	}
	var models []opened
	backends := map[string]batchagent.Backend{}
	admission := map[batchagent.Backend]batchagent.Admission{}
	var routers []namedRouter
	for _, b := range sc.Backends {
		var m llm.Model
		a := batchagent.Admission{MaxInflight: b.MaxInflight, FixedInflight: b.FixedInflight,
			RateLimit: batchagent.RateLimit{RPM: b.RPM, TPM: b.TPM}}
		if len(b.Deployments) > 0 {
			rt, err := OpenDeployments(ctx, b.Deployments, b.Model, b.Cooldown, getenv)
			if err != nil {
				return nil, fmt.Errorf("backends.%s: %w", b.Name, err)
			}
			routers = append(routers, namedRouter{b.Name, rt})
			m = rt
			a = RouterAdmission(a, rt)
		} else {
			var err error
			if m, err = OpenBackend(ctx, b.URL, b.Model, b.APIKeyEnv, getenv); err != nil {
				return nil, fmt.Errorf("backends.%s: %w", b.Name, err)
			}
		}
		be := batchagent.Backend{Model: m, Name: b.Model}
		backends[b.Name] = be
		if b.TPM > 0 {
			counter, err := tokens.New(b.Model)
			if err != nil {
				return nil, fmt.Errorf("backends.%s: %w", b.Name, err)
			}
			a.RateLimit.CountTokens = counter.Count
		}
		admission[be] = a
		models = append(models, opened{b.URL, b.Model, m})
	}
	// modelOf returns the served backend's Model where url and model
	// equal one's, else opens the backend with the agent's admission.
	modelOf := func(cj *Job, url, model, keyEnv string) (llm.Model, error) {
		for _, o := range models {
			if o.url == url && o.model == model {
				return o.m, nil
			}
		}
		m, err := OpenBackend(ctx, url, model, keyEnv, getenv)
		if err != nil {
			return nil, err
		}
		admission[batchagent.Backend{Model: m, Name: model}] = cj.Engine.Admission
		return m, nil
	}
	agents := map[string]*batchagent.Spec{}
	for _, a := range sc.Agents {
		cj := a.Job
		m, err := modelOf(cj, cj.Backend, cj.Def.ModelName, cj.APIKeyEnv)
		if err != nil {
			return nil, fmt.Errorf("agents.%s: %w", a.Name, err)
		}
		var fallbacks []batchagent.Fallback
		for i, f := range cj.Fallbacks {
			fm, err := modelOf(cj, f.Backend, f.Model, f.APIKeyEnv)
			if err != nil {
				return nil, fmt.Errorf("agents.%s.fallbacks[%d]: %w", a.Name, i, err)
			}
			fallbacks = append(fallbacks, batchagent.Fallback{Model: fm, ModelName: f.Model})
		}
		tools, err := cj.OpenTools(ctx)
		if err != nil {
			return nil, fmt.Errorf("agents.%s: %w", a.Name, err)
		}
		g.tools = append(g.tools, tools)
		def := cj.Def
		def.ID, def.Model, def.Tools = a.Name, m, tools.Tools
		def.ToolPool.Policies = tools.Policies
		def.Priority = batchagent.Interactive
		def.Fallbacks = fallbacks
		TableWindow(&def) // as for "batchagent run"
		if def.Budget == 0 {
			// As for "batchagent run": the file's limits.budget wins.
			if def.Budget, err = batchagent.BudgetFrom(getenv); err != nil {
				return nil, fmt.Errorf("agents.%s: %w", a.Name, err)
			}
		}
		if agents[a.Name], err = batchagent.NewSpec(def); err != nil {
			return nil, fmt.Errorf("agents.%s: %w", a.Name, err)
		}
	}
	var keys []server.Key
	for i, k := range sc.Keys {
		sum := k.SHA256
		if k.Env != "" {
			v := getenv(k.Env)
			if v == "" {
				return nil, fmt.Errorf("keys[%d]: the variable %s is empty or unset", i, k.Env)
			}
			sum = server.HashKey(v)
		}
		keys = append(keys, server.Key{Name: k.Name, SHA256: sum, MaxConcurrent: k.MaxConcurrent, RPM: k.RPM, MaxCost: k.MaxCost})
	}
	prices := map[string]server.Price{}
	for _, p := range sc.Prices {
		prices[p.Model] = server.Price{Input: p.Input, CachedInput: p.CachedInput, Output: p.Output, CacheWrite: p.CacheWrite}
	}
	warnUnpriced(sc, prices, logger)
	engine, err := batchagent.New(batchagent.Config{Backends: admission, Logger: logger})
	if err != nil {
		return nil, err
	}
	metrics := telemetry.NewMetrics()
	if err := metrics.Watch(engine); err != nil {
		return nil, err
	}
	tp, shutdown, err := telemetry.SetupTracing(ctx)
	if err != nil {
		return nil, err
	}
	g.shutdownTrace = shutdown
	tracer := telemetry.NewAgentTracer(tp)
	tracer.Content = sc.TraceContent
	if err := metrics.WatchDeployments(deploymentStats(routers)); err != nil {
		return nil, err
	}
	g.Server, err = server.New(server.Config{
		Engine: engine, Backends: backends, Agents: agents, Keys: keys,
		MaxBodyBytes: sc.MaxBodyBytes, RequestTimeout: sc.RequestTimeout, Prices: prices, Logger: logger,
		HeaderTimeout: sc.HeaderTimeout, BodyTimeout: sc.BodyTimeout, UploadTimeout: sc.Batch.UploadTimeout, IdleTimeout: sc.IdleTimeout,
		MaxConnections: sc.MaxConnections, MaxConnectionsPerClient: sc.MaxConnectionsPerClient,
		Recorder: metrics, Metrics: metrics.Exposition(),
		// A caller's traceparent becomes the parent of the request's spans.
		Instrument: func(route string, h http.Handler) http.Handler {
			return metrics.Handler(route, telemetry.Extract(h))
		},
		Tracer: tracer, Observer: tracer, Batches: store,
		BatchMaxLines: sc.Batch.MaxLines, BatchMaxBytes: sc.Batch.MaxBytes, BatchConcurrency: sc.Batch.Concurrency,
	})
	if err != nil {
		return nil, err
	}
	srv := g.Server
	if err := metrics.WatchKeySpend(func() []telemetry.KeySpend {
		var out []telemetry.KeySpend
		for _, k := range srv.Spend() {
			out = append(out, telemetry.KeySpend{Name: k.Name, Spent: k.Spent, Reserved: k.Reserved, Limit: k.Limit})
		}
		return out
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// warnUnpriced logs, once per model, the served models a key with a
// max_cost cannot use because neither the file's prices nor the built-in
// table price them: their requests by such a key are refused.
func warnUnpriced(sc *Serve, served map[string]server.Price, logger *slog.Logger) {
	capped := false
	for _, k := range sc.Keys {
		capped = capped || k.MaxCost > 0
	}
	if !capped {
		return
	}
	known := func(name, upstream string) bool {
		_, set := served[name]
		_, inTable := prices.Lookup(upstream)
		_, byName := prices.Lookup(name)
		return set || inTable || byName
	}
	for _, b := range sc.Backends {
		if !known(b.Name, b.Model) {
			prices.Warn(logger, b.Name, "the serve config's prices; a key with max_cost is refused this model")
		}
	}
	for _, a := range sc.Agents {
		if name := "agent:" + a.Name; !known(name, a.Job.Def.ModelName) {
			prices.Warn(logger, name, "the serve config's prices; a key with max_cost is refused this model")
		}
	}
}

// TableWindow gives def the built-in table's context window for its
// model (as of prices.Dated) when the file sets none.
func TableWindow(def *batchagent.Def) {
	if w, ok := prices.ContextWindow(def.ModelName); ok && def.ContextWindow == 0 {
		def.ContextWindow = w
	}
}

// namedRouter is a served model over several deployments.
type namedRouter struct {
	model string
	r     *router.Router
}

// deploymentStats returns the reader of the routers' deployments for
// /metrics.
func deploymentStats(routers []namedRouter) func() []telemetry.DeploymentStats {
	return func() []telemetry.DeploymentStats {
		var out []telemetry.DeploymentStats
		for _, nr := range routers {
			for _, st := range nr.r.Stats() {
				out = append(out, telemetry.DeploymentStats{Model: nr.model, Deployment: st.Name, Inflight: st.Inflight,
					Limit: st.Limit, Requests: st.Requests, Failures: st.Failures, State: st.State})
			}
		}
		return out
	}
}
