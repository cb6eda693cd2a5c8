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
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/outfile"
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
--data-dir, and a server restarted on it resumes its unfinished batches. On
start it prints its address, then each model and agent it serves, one a line,
with its backend as scheme://host:port. It runs until SIGINT or SIGTERM, then drains: /health and /ready answer 503 at
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

// writeServed prints what the gateway of sc serves, one line each: every
// backend model and agent by the name clients ask for, with its backend as
// scheme://host:port (never a path, query or key), the keys with a spend
// cap, then the Batch API's data directory.
func writeServed(w io.Writer, sc *config.Serve, dataDir string) {
	for _, b := range sc.Backends {
		if len(b.Deployments) == 0 {
			fmt.Fprintf(w, "  model %q: passthrough to %s%s\n", b.Name, config.BackendAddr(b.URL), upstreamModel(b.Model))
			continue
		}
		var to []string
		for _, d := range b.Deployments {
			to = append(to, config.BackendAddr(d.URL)+upstreamModel(cmp.Or(d.Model, b.Model)))
		}
		fmt.Fprintf(w, "  model %q: passthrough to the least-loaded of %s\n", b.Name, strings.Join(to, ", "))
	}
	for _, a := range sc.Agents {
		var tools []string
		for _, t := range a.Job.Tools {
			tools = append(tools, t.Name)
		}
		for _, m := range a.Job.MCP {
			tools = append(tools, "mcp:"+m.Server.Name)
		}
		line := fmt.Sprintf("  model %q: agent on %s%s", "agent:"+a.Name, config.BackendAddr(a.Job.Backend), upstreamModel(a.Job.Def.ModelName))
		if len(tools) > 0 {
			line += ", tools " + strings.Join(tools, ", ")
		}
		fmt.Fprintln(w, line)
	}
	for i, k := range sc.Keys {
		if k.MaxCost > 0 {
			name := k.Name
			if name == "" {
				name = fmt.Sprintf("key-%d", i)
			}
			fmt.Fprintf(w, "  key %q: max_cost $%g (spend counted from 0 by this process; over it: 429 budget_exceeded)\n", name, k.MaxCost)
		}
	}
	fmt.Fprintf(w, "  batch API: /v1/files, /v1/batches (data in %s)\n", dataDir)
}

// upstreamModel is the " model M" part of a served line, empty when no
// model name is sent upstream.
func upstreamModel(m string) string {
	if m == "" {
		return ""
	}
	return fmt.Sprintf(" model %q", m)
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
	g, err := sc.Open(ctx, store, logger, environ)
	if err != nil {
		fmt.Fprintf(stderr, "batchagent serve: %s: %v\n", f.config, err)
		return exitUsage
	}
	defer g.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent serve:", err)
		// Batches resumed at start are running: stop them before the
		// store closes.
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sc.DrainGrace())
		defer cancel()
		_ = g.Server.Shutdown(shutCtx) // the listen error is the one to report
		return exitFailed
	}
	fmt.Fprintf(stderr, "listening on http://%s\n", ln.Addr())
	writeServed(stderr, sc, dataDir)
	served := make(chan error, 1) // Serve's result
	go func() { served <- g.Server.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	grace := sc.DrainGrace()
	if serveErr == nil {
		fmt.Fprintf(stderr, "draining: /health is 503, requests not begun are answered 503, those begun have up to %v to finish\n", grace)
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	shutErr := g.Server.Shutdown(shutCtx)
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
