package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// shutdownGrace is how long `sim serve` lets in-flight requests finish
// after a stop signal before it closes their connections.
const shutdownGrace = 5 * time.Second

// simFlags are the flags of `batchagent sim serve`.
type simFlags struct {
	cfg       simhttp.Config
	addr      string
	toolTurns int
	apiKeyEnv string
	fault     string
	verbose   bool
}

// simServe serves the HTTP simulator until ctx is done: `batchagent sim
// serve`. logger is the global one; --v lowers its level to Debug.
func simServe(ctx context.Context, f simFlags, logger *slog.Logger, stderr io.Writer) int {
	cfg, addr, toolTurns, apiKeyEnv, fault := f.cfg, f.addr, f.toolTurns, f.apiKeyEnv, f.fault
	if _, port, err := net.SplitHostPort(addr); err != nil || !validPort(port) {
		fmt.Fprintf(stderr, "batchagent sim serve: --addr %q: want HOST:PORT\n", addr)
		return exitUsage
	}
	cfg.Model.ToolTurns = toolTurns
	if toolTurns == 0 {
		cfg.Model.ToolTurns = -1 // an explicit 0: never call tools
	}
	cfg.Fault = simhttp.Fault(fault)
	if apiKeyEnv != "" {
		if cfg.APIKey = os.Getenv(apiKeyEnv); cfg.APIKey == "" {
			fmt.Fprintf(stderr, "batchagent sim serve: --api-key-env %s: the variable is empty or unset\n", apiKeyEnv)
			return exitUsage
		}
	}
	cfg.Logger = logger
	s, err := simhttp.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "listening on http://%s\n", ln.Addr())
	if err := serveSim(ctx, s, ln); err != nil {
		fmt.Fprintln(stderr, "batchagent sim serve:", err)
		return exitFailed
	}
	return exitOK
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

// serveSim serves s on ln until ctx is done, then shuts the HTTP server
// down (in-flight requests get shutdownGrace to finish) and stops the
// scheduler. It returns only once both have stopped.
func serveSim(ctx context.Context, s *simhttp.Server, ln net.Listener) error {
	// The scheduler outlives ctx so that in-flight requests can finish
	// during the graceful shutdown.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	ran := make(chan error, 1) // Run's result
	go func() { ran <- s.Run(runCtx) }()

	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1) // Serve's result
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close() // grace is over: cut the remaining connections
	}
	if serveErr == nil {
		serveErr = <-served
	}
	stopRun()
	runErr := <-ran
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, runErr)
}
