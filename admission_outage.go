package batchagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/llm"
)

// DefaultOutageBudget is the default of [Job.OutageBudget].
const DefaultOutageBudget = 5 * time.Minute

// DefaultStartWindow is how long connection failures may last, from the
// first, before any model call got an answer, until the engine declares the
// backend unavailable ([ErrBackendUnavailable]); a shorter
// [Job.OutageBudget] shortens it.
const DefaultStartWindow = 10 * time.Second

// maxConnPause caps the global pause after connection failures, so that
// admission tries the backend again at least this often while it is down.
const maxConnPause = 5 * time.Second

// ErrBackendUnavailable ends a run whose backend never answered: no model
// call got an answer and connections to the backend failed for the start
// window ([DefaultStartWindow], or [Job.OutageBudget] when shorter), or an
// agent spent its outage budget on connection failures. The agents it
// stops get results of kind [KindCanceled] whose error wraps it
// (errors.Is), as do the inputs not started under [Engine.Run] ([Stream]
// yields nothing for those, as after a cancellation); nothing is
// checkpointed for them, so with a Checkpoint they stay pending for the
// next run. Its message names the last connection failure. The check
// applies to the calls the engine gates: every backend that declares its
// capabilities (all HTTP backends), or any with a limit set.
var ErrBackendUnavailable = errors.New("batchagent: backend unavailable")

// outage is the admission gate's view of the backend's health: a global
// pause after rate-limit and overload answers that ask for a wait
// (Retry-After) and after connection failures, and the detection of a
// backend that is unreachable from the start.
type outage struct {
	base, max time.Duration // back-off of the pause after connection failures
	window    time.Duration // start window; zero: no detection

	mu        sync.Mutex    // protects the fields below
	until     time.Time     // admission paused until then
	gen       uint64        // connection pauses begun so far
	connFails int           // consecutive connection pauses, for the back-off
	answered  bool          // some call got an answer from the backend
	firstFail time.Time     // first connection failure while !answered
	down      chan struct{} // closed once downErr is set
	downErr   error         // wraps ErrBackendUnavailable once the backend is declared down
}

// newOutage returns the outage state of a job's admission.
func newOutage(j Job) *outage {
	base, maxd := j.Backoff.Base, j.Backoff.Max
	if base <= 0 {
		base = retry.DefaultBase
	}
	if maxd <= 0 {
		maxd = retry.DefaultMax
	}
	o := &outage{base: base, max: maxd, down: make(chan struct{})}
	budget := j.OutageBudget
	if budget == 0 {
		budget = DefaultOutageBudget
	}
	if budget > 0 {
		o.window = min(DefaultStartWindow, budget)
	}
	return o
}

// reset forgets a backend declared down, so that a new run tries it again.
func (o *outage) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.downErr != nil {
		o.downErr, o.down, o.firstFail = nil, make(chan struct{}), time.Time{}
	}
}

// unavailable returns the error that declared the backend down, or nil.
func (o *outage) unavailable() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.downErr
}

// downed returns a channel closed once the backend is declared down.
func (o *outage) downed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// generation identifies the connection pauses so far, for calls admitted
// now: a failure of a call admitted before the last pause began does not
// lengthen the next one.
func (o *outage) generation() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen
}

// pausedFor returns how long admission stays paused from now, or zero.
func (o *outage) pausedFor() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Until(o.until)
}

// wait blocks while admission is paused. It returns the unavailability
// error once the backend is declared down, or ctx's error.
func (o *outage) wait(ctx context.Context) error {
	for {
		o.mu.Lock()
		d, down, err := time.Until(o.until), o.down, o.downErr
		o.mu.Unlock()
		if err != nil {
			return err
		}
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-down:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// observe records the outcome of a call admitted in generation gen: an
// answer, a rate-limit or overload answer asking for a wait, or a
// connection failure. It returns the pause that err began while
// admission was open, or zero, and whether err is the first connection
// failure since the backend last answered.
func (o *outage) observe(gen uint64, err error) (began time.Duration, first bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false // the caller gave up: nothing learnt about the backend
	}
	if _, ok := errors.AsType[*llm.APIError](err); err != nil && !ok {
		return 0, false // not the backend's answer (a stopped agent, a misuse)
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !errors.Is(err, llm.ErrConnection) {
		o.answered = true
		o.connFails = 0
		o.firstFail = time.Time{}
		if ra := llm.RetryAfter(err); ra > 0 && (errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrOverloaded)) {
			return o.pauseLocked(now, now.Add(min(ra, o.max))), false
		}
		return 0, false
	}
	if gen == o.gen {
		// The first failure since the last pause began: pause everyone,
		// twice as long as last time.
		o.gen++
		o.connFails++
		first = o.connFails == 1
		pause := o.max
		if n := o.connFails - 1; n < 32 && o.base<<n > 0 && o.base<<n < pause {
			pause = o.base << n
		}
		pause = min(pause, maxConnPause)
		if !o.answered && !o.firstFail.IsZero() && o.window > 0 {
			// Try again when the start window ends, not later.
			pause = max(min(pause, o.firstFail.Add(o.window).Sub(now)), time.Millisecond)
		}
		began = o.pauseLocked(now, now.Add(pause))
	}
	if o.answered || o.window == 0 || o.downErr != nil {
		return began, first
	}
	if o.firstFail.IsZero() {
		o.firstFail = now
	}
	if since := now.Sub(o.firstFail); since >= o.window {
		o.declareLocked(now, err)
	}
	return began, first
}

// gaveUp is told that an agent failed with err after its outage budget:
// if err is a connection failure and no call ever got an answer, the
// backend is declared down at once, so that the agent's input stays
// pending like the others'.
func (o *outage) gaveUp(err error) {
	if !errors.Is(err, llm.ErrConnection) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.answered && o.window > 0 && o.downErr == nil {
		o.declareLocked(time.Now(), err)
	}
}

func (o *outage) declareLocked(now time.Time, err error) {
	since := time.Duration(0)
	if !o.firstFail.IsZero() {
		since = now.Sub(o.firstFail)
	}
	o.downErr = fmt.Errorf("%w: no answer in %v since the first connection failure, and none before: %v",
		ErrBackendUnavailable, since.Round(time.Millisecond), err)
	close(o.down)
}

// pauseLocked pauses admission until t, or longer if it already is. It
// returns the pause when admission was open at now, else zero.
func (o *outage) pauseLocked(now, t time.Time) time.Duration {
	open := !o.until.After(now)
	if t.After(o.until) {
		o.until = t
	}
	if open {
		return t.Sub(now)
	}
	return 0
}
