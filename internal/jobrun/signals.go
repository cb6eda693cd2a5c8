package jobrun

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

// GracePeriod bounds how long a first SIGINT/SIGTERM waits for the turns
// in flight before stopping at once.
const GracePeriod = 30 * time.Second

// handleSignals stops the run in two phases with [batchagent.Engine.Shutdown]:
// the first SIGINT or SIGTERM shuts the engine down (no new inputs;
// agents stop after the turn in flight, which is checkpointed), with a
// context that ends at the second signal or at the end of the grace
// period, when Shutdown cancels what is left at once. The returned
// function stops the handler and waits for its goroutines.
func (r *Run) handleSignals(interrupted *atomic.Bool, stderr io.Writer) func() {
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
		fmt.Fprintf(stderr, "\nbatchagent: stopping: finishing the turns in flight\n  (up to %s; interrupt again to stop at once)\n", GracePeriod)
		ctx, stop := context.WithTimeout(context.Background(), GracePeriod)
		defer stop()
		shut := make(chan struct{})
		wg.Go(func() { // ends the grace at a second signal
			select {
			case <-sigs:
				fmt.Fprintln(stderr, "batchagent: stopping at once")
				stop()
			case <-shut:
			case <-done:
				// The run is over: Shutdown returns as soon as its
				// stream has ended.
			}
		})
		// Shutdown's error says only that the grace ended first: the
		// results say which agents were stopped.
		_ = r.engine.Shutdown(ctx)
		close(shut)
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}
