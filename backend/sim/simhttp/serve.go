package simhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace is how long Serve lets in-flight requests finish once its
// context is done before it closes their connections.
const ShutdownGrace = 5 * time.Second

// Serve serves s on ln, running its scheduler, until ctx is done, then
// shuts the HTTP server down (in-flight requests get ShutdownGrace to
// finish) and stops the scheduler. It returns only once both have
// stopped: nil after a stop by ctx, else what failed.
func Serve(ctx context.Context, s *Server, ln net.Listener) error {
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
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
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
