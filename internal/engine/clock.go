package engine

import (
	"context"
	"sync"
	"time"

	"github.com/batchagent/batchagent/job"
)

// workClock is an agent's timeout (Def.Timeout) counted over the agent's
// own work: it stops while one of the agent's model calls waits for
// admission (a slot of its backend, local or shared with other
// processes, the rate budgets, a pause), so that an agent queued behind
// others, or behind a limit another process holds, is never timed out for
// it. When the time left runs out it cancels the agent's context with
// job.ErrAgentTimeout as the cause.
//
// It needs no goroutine: a timer stopped and re-armed. It is safe for
// concurrent use (a permit may be released from another goroutine, and a
// Stream's admission waits may overlap).
type workClock struct {
	cancel context.CancelCauseFunc
	timer  *time.Timer

	mu      sync.Mutex    // protects the fields below
	left    time.Duration // work time left when the clock last stopped
	since   time.Time     // when it last started
	waits   int           // admission waits in progress: the clock stops at the first
	expired bool          // the timer fired (or was about to): the clock is over
}

// workClockKey is the context key of an agent's *workClock.
type workClockKey struct{}

// withWorkClock returns ctx under the agent's timeout d, a work clock
// started now, and the function that releases it.
func withWorkClock(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &workClock{cancel: cancel, left: d, since: time.Now()}
	c.timer = time.AfterFunc(d, func() { cancel(job.ErrAgentTimeout) })
	return context.WithValue(ctx, workClockKey{}, c), func() {
		c.timer.Stop()
		cancel(context.Canceled)
	}
}

// pauseWork stops the work clock of ctx's agent, if it has one, for an
// admission wait; the returned function starts it again.
func pauseWork(ctx context.Context) (resume func()) {
	c, _ := ctx.Value(workClockKey{}).(*workClock)
	if c == nil {
		return func() {}
	}
	c.pause()
	return c.resume
}

func (c *workClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits++
	if c.waits > 1 || c.expired {
		return
	}
	if !c.timer.Stop() {
		c.expired = true // it fired: the agent's context is canceled
		return
	}
	c.left -= time.Since(c.since)
}

func (c *workClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits--
	if c.waits > 0 || c.expired {
		return
	}
	c.since = time.Now()
	c.timer.Reset(max(c.left, 0))
}
