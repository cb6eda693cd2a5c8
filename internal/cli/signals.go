package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// gracePeriod bounds how long a first SIGINT/SIGTERM waits for the turns
// in flight before stopping at once.
const gracePeriod = 30 * time.Second

// handleSignals stops the run in two phases: the first SIGINT or SIGTERM
// drains the engine (no new inputs; agents stop after the turn in flight,
// which is checkpointed), the second, or the end of the grace period,
// cancels everything at once. The returned function stops the handler
// and waits for its goroutine.
func (r *runner) handleSignals(cancel context.CancelFunc, interrupted *atomic.Bool, stderr io.Writer) func() {
	sigs := make(chan os.Signal, 2) // a signal may arrive while the handler prints
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		interrupted.Store(true)
		r.engine.Drain()
		fmt.Fprintf(stderr, "\nbatchagent: stopping: finishing the turns in flight (up to %s; interrupt again to stop at once)\n", gracePeriod)
		t := time.NewTimer(gracePeriod)
		defer t.Stop()
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "batchagent: stopping at once")
			cancel()
		case <-t.C:
			cancel()
		case <-done:
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}
