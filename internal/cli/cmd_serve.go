package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
)

// serveFlags are the flags of `batchagent serve`.
type serveFlags struct {
	config  string
	addr    string
	dataDir string
}

// serveCommand is `batchagent serve`. It is added to the root by
// newRoot.
func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config serve.yaml [flags]",
		Short: "Serve backends and agents behind an OpenAI-compatible API",
		Long: `Serve the backends and agents of a serve config file behind OpenAI's chat
completions API (POST /v1/chat/completions, streamed or not; GET /v1/models,
/health, /ready). A request for a backend's model name is passed through the
engine's admission in the interactive class; a request for "agent:NAME" runs
that agent, streaming its progress as reasoning events. It also serves
OpenAI's Batch API (/v1/files, /v1/batches): each line of a batch runs in the
batch class, below interactive requests; files and batches are kept in
--data-dir, and a server restarted on it resumes its unfinished batches. It
runs until SIGINT or SIGTERM, then drains: /health and /ready answer 503 at
once, so that a load balancer stops sending; new requests, and those whose
answer has not begun (waiting for admission or for the backend's first
token), are answered 503 with Retry-After; those begun have shutdown_grace
(default: request_timeout) to finish, then are stopped; it exits 0.`,
		Example: `  batchagent serve --config examples/serve/serve.yaml --addr 127.0.0.1:8080
  curl -s http://127.0.0.1:8080/v1/chat/completions -d '{"model":"agent:reviewer","messages":[{"role":"user","content":"cache.go"}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.config == "" {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--config is required")}
			}
			return withSignals(cmd.Context(), func(ctx context.Context) int {
				return serveGateway(ctx, f, a.logger, a.stderr)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "serve config file (YAML): listen address, backends, agents, keys and limits")
	fl.StringVar(&f.addr, "addr", "", "address to listen on, overriding the config's addr (port 0: any free port)")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory of the Batch API's files and batches (SQLite); unfinished batches resume from it (default: batchagent-data next to the config file)")
	return cmd
}

// serveGateway serves the gateway of f's config until ctx is done.
func serveGateway(ctx context.Context, f serveFlags, logger *slog.Logger, stderr io.Writer) int {
	sc, err := config.LoadServe(f.config)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent serve:", err)
		return exitUsage
	}
	addr := sc.Addr
	if f.addr != "" {
		addr = f.addr
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || !validPort(port) {
		fmt.Fprintf(stderr, "batchagent serve: --addr %q: want HOST:PORT\n", addr)
		return exitUsage
	}
	dataDir := f.dataDir
	if dataDir == "" {
		dataDir = filepath.Join(filepath.Dir(f.config), "batchagent-data")
	}
	// One process per data directory: a second would run the same lines
	// again and write the same files.
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "batchagent serve: --data-dir: %v\n", err)
		return exitFailed
	}
	lock, err := outfile.TakeLock(filepath.Join(dataDir, "batches.db"), "data directory", fmt.Sprintf("pid %d: batchagent serve --config %s", os.Getpid(), f.config))
	if err != nil {
		fmt.Fprintln(stderr, "batchagent serve:", err)
		return exitUsage
	}
	defer lock.Close()
	store, err := batchapi.Open(dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "batchagent serve: --data-dir: %v\n", err)
		return exitFailed
	}
	defer store.Close()
	g, err := openGateway(ctx, sc, store, logger, environ)
	if err != nil {
		fmt.Fprintf(stderr, "batchagent serve: %s: %v\n", f.config, err)
		return exitUsage
	}
	defer g.close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent serve:", err)
		// Batches resumed at start are running: stop them before the
		// store closes.
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainGrace(sc))
		defer cancel()
		_ = g.srv.Shutdown(shutCtx) // the listen error is the one to report
		return exitFailed
	}
	fmt.Fprintf(stderr, "listening on http://%s\n", ln.Addr())
	served := make(chan error, 1) // Serve's result
	go func() { served <- g.srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	grace := drainGrace(sc)
	if serveErr == nil {
		fmt.Fprintf(stderr, "draining: /health is 503, requests not begun are answered 503, those begun have up to %v to finish\n", grace)
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	shutErr := g.srv.Shutdown(shutCtx)
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(shutErr, context.DeadlineExceeded) {
		// The drain the operator asked for ended as configured: the
		// requests left were ended with an error.
		fmt.Fprintf(stderr, "batchagent serve: shutdown_grace (%v) ended: the requests still in flight were stopped\n", grace)
		shutErr = nil
	}
	if err := errors.Join(serveErr, shutErr); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "batchagent serve:", err)
		return exitFailed
	}
	return exitOK
}

// drainGrace is how long a drain lets the requests begun finish:
// shutdown_grace, else request_timeout, else the server's default of it.
func drainGrace(sc *config.Serve) time.Duration {
	return cmp.Or(sc.ShutdownGrace, sc.RequestTimeout, server.DefaultRequestTimeout)
}

// gateway is a serve config opened: the server and what must be closed
// after it (the agents' tools).
type gateway struct {
	srv           *server.Server
	tools         []*builtTools
	shutdownTrace func(context.Context) error // flushes the traces; nil before tracing is set up
}

func (g *gateway) close() {
	for _, t := range g.tools {
		_ = t.close() // nothing to report on the way out
	}
	if g.shutdownTrace != nil {
		ctx, cancel := context.WithTimeout(context.Background(), telemetry.StopTimeout)
		defer cancel()
		_ = g.shutdownTrace(ctx) // the exporter's failures were logged by the SDK
	}
}

// openGateway opens the backends of sc, builds its agents and keys, and
// returns the gateway on a new engine, serving the Batch API from store
// (nil: not served). An agent whose backend URL and
// model equal a served backend's shares its Model, and so its admission.
// getenv reads the environment (backend and API keys).
func openGateway(ctx context.Context, sc *config.Serve, store *batchapi.Store, logger *slog.Logger, getenv func(string) string) (_ *gateway, err error) {
	g := &gateway{}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	type opened struct {
		url, model string
		m          llm.Model
	}
	var models []opened
	backends := map[string]batchagent.Backend{}
	admission := map[batchagent.Backend]batchagent.Admission{}
	for _, b := range sc.Backends {
		m, err := config.OpenBackend(ctx, b.URL, b.Model, b.APIKeyEnv, getenv)
		if err != nil {
			return nil, fmt.Errorf("backends.%s: %w", b.Name, err)
		}
		be := batchagent.Backend{Model: m, Name: b.Model}
		backends[b.Name] = be
		a := batchagent.Admission{MaxInflight: b.MaxInflight, FixedInflight: b.FixedInflight,
			RateLimit: batchagent.RateLimit{RPM: b.RPM, TPM: b.TPM}}
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
	modelOf := func(cj *config.Job, url, model, keyEnv string) (llm.Model, error) {
		for _, o := range models {
			if o.url == url && o.model == model {
				return o.m, nil
			}
		}
		m, err := config.OpenBackend(ctx, url, model, keyEnv, getenv)
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
		tools, err := buildTools(ctx, cj)
		if err != nil {
			return nil, fmt.Errorf("agents.%s: %w", a.Name, err)
		}
		g.tools = append(g.tools, tools)
		def := cj.Def
		def.ID, def.Model, def.Tools = a.Name, m, tools.tools
		def.ToolPool.Policies = tools.policies
		def.Priority = batchagent.Interactive
		def.Fallbacks = fallbacks
		tableWindow(&def) // as for "batchagent run"
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
		keys = append(keys, server.Key{Name: k.Name, SHA256: sum, MaxConcurrent: k.MaxConcurrent, RPM: k.RPM})
	}
	prices := map[string]server.Price{}
	for _, p := range sc.Prices {
		prices[p.Model] = server.Price{Input: p.Input, CachedInput: p.CachedInput, Output: p.Output}
	}
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
	g.srv, err = server.New(server.Config{
		Engine: engine, Backends: backends, Agents: agents, Keys: keys,
		MaxBodyBytes: sc.MaxBodyBytes, RequestTimeout: sc.RequestTimeout, Prices: prices, Logger: logger,
		HeaderTimeout: sc.HeaderTimeout, BodyTimeout: sc.BodyTimeout, UploadTimeout: sc.Batch.UploadTimeout, IdleTimeout: sc.IdleTimeout,
		MaxConnections: sc.MaxConnections, MaxConnectionsPerClient: sc.MaxConnectionsPerClient,
		Recorder: metrics, Metrics: metrics.Exposition(), Instrument: metrics.Handler,
		Tracer: tracer, Observer: tracer, Batches: store,
		BatchMaxLines: sc.Batch.MaxLines, BatchMaxBytes: sc.Batch.MaxBytes, BatchConcurrency: sc.Batch.Concurrency,
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}
