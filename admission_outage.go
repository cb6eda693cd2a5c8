package batchagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/llm"
)

// DefaultStartWindow is how long connection failures may last, from the
// first, before any model call got an answer, until the engine declares the
// backend unavailable ([ErrBackendUnavailable]); a shorter
// [Admission.StartWindow] sets it.
const DefaultStartWindow = 10 * time.Second

// maxConnPause caps the global pause after connection failures, so that
// admission tries the backend again at least this often while it is down.
const maxConnPause = 5 * time.Second

// ErrBackendUnavailable ends a run whose backend never answered: no model
// call got an answer while the run was in progress, and connections to the backend failed for the start
// window ([Admission.StartWindow]), or an
// agent spent its outage budget on connection failures. The agents it
// stops get results of kind [KindCanceled] whose error wraps it
// (errors.Is), as do the inputs not started under [Engine.Run] ([Stream]
// yields nothing for those, as after a cancellation); nothing is
// checkpointed for them, so with a Checkpoint they stay pending for the
// next run. Its message names the last connection failure. The check
// applies to the calls the engine gates: every backend that declares its
// capabilities (all HTTP backends), or any with a limit set.
var ErrBackendUnavailable = errors.New("batchagent: backend unavailable")

// connectTime is how long a model call may stay in flight before it
// counts as connected: a refused or reset connection fails well within
// it. The backend is not declared down while a call admitted this long
// ago is still in flight: it may be a slow first answer; a call that
// hangs on an unreachable host fails at its dial timeout, and the
// failures after it then declare the backend down.
const connectTime = 2 * time.Second

// outage is the admission gate's view of the backend's health: a global
// pause after rate-limit and overload answers that ask for a wait
// (Retry-After) and after connection failures, and the detection, per
// run, of a backend that is unreachable from the run's start.
type outage struct {
	base, max time.Duration // back-off of the pause after connection failures
	window    time.Duration // start window; zero: no detection

	mu        sync.Mutex              // protects the fields below
	until     time.Time               // admission paused until then
	gen       uint64                  // connection pauses begun so far
	connFails int                     // consecutive connection pauses, for the back-off
	served    time.Time               // when a call last succeeded or began its answer
	calls     uint64                  // calls admitted so far: the next call's id
	inflight  map[uint64]time.Time    // admitted calls not yet ended, and when each was admitted
	runs      map[*outageRun]struct{} // the runs in progress
}

// outageRun is one run's view of the backend: whether any call was
// answered while the run was in progress, and whether the run declared
// the backend down. Each run has its own, so that a backend that answered
// an earlier or another run is still found dead by a run it never
// answered, and one run's declaration does not touch another's.
type outageRun struct {
	down chan struct{} // closed once err is set

	// Protected by the outage's mu.
	answered  bool      // some call was answered during the run
	firstFail time.Time // first connection failure in the run since the last answer
	err       error     // wraps ErrBackendUnavailable once the run declared the backend down
}

// newOutage returns the outage state of a job's admission.
func newOutage(j Admission) *outage {
	base, maxd := j.PauseBackoff.Base, j.PauseBackoff.Max
	if base <= 0 {
		base = retry.DefaultBase
	}
	if maxd <= 0 {
		maxd = retry.DefaultMax
	}
	o := &outage{base: base, max: maxd, inflight: map[uint64]time.Time{}, runs: map[*outageRun]struct{}{}}
	if !j.NoStartWindow {
		o.window = j.StartWindow
		if o.window == 0 {
			o.window = DefaultStartWindow
		}
	}
	return o
}

// begin registers a run: until end, it learns of every answer and
// connection failure of the backend.
func (o *outage) begin() *outageRun {
	r := &outageRun{down: make(chan struct{})}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runs[r] = struct{}{}
	return r
}

// end unregisters a run that begin returned.
func (o *outage) end(r *outageRun) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.runs, r)
}

// unavailable returns the error with which run r declared the backend
// down, or nil.
func (o *outage) unavailable(r *outageRun) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return r.err
}

// admit records a call admitted in the current generation, the
// connection pauses so far: a failure of a call admitted before the last
// pause began does not lengthen the next one. It returns the call's id
// and generation, for observe; or ok false, admitting nothing, while
// admission is paused.
func (o *outage) admit() (id, gen uint64, ok bool) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.until.After(now) {
		return 0, 0, false
	}
	o.calls++
	o.inflight[o.calls] = now
	return o.calls, o.gen, true
}

// pausedFor returns how long admission stays paused from now, or zero.
func (o *outage) pausedFor() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Until(o.until)
}

// lastServed returns when a call last succeeded or began its answer.
func (o *outage) lastServed() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.served
}

// wait blocks while admission is paused. It returns agent.ErrStopped once
// stop is closed (nil: never), or ctx's error.
func (o *outage) wait(ctx context.Context, stop <-chan struct{}) error {
	for {
		d := o.pausedFor()
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return agent.ErrStopped
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// answering records that a call began to get its answer (the first
// event of a stream): the backend is reachable.
func (o *outage) answering() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reachedLocked(time.Now(), true)
}

// reachedLocked records an answer of the backend; served says whether it
// answered the call itself (not with a rate limit or an error).
func (o *outage) reachedLocked(now time.Time, served bool) {
	o.connFails = 0
	if served {
		o.served = now
	}
	for r := range o.runs {
		r.answered, r.firstFail = true, time.Time{}
	}
}

// observe records the outcome of call id, admitted in generation gen: an
// answer, a rate-limit or overload answer asking for a wait, or a
// connection failure. began says whether the backend began to answer the
// call (its first event came): a connection that broke after it is not
// a failure to reach the backend. It returns the pause that err began
// while admission was open, or zero, and whether err is the first
// connection failure since the backend last answered.
func (o *outage) observe(id, gen uint64, began bool, err error) (pause time.Duration, first bool) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.inflight, id)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false // the caller gave up: nothing learnt about the backend
	}
	if _, ok := errors.AsType[*llm.APIError](err); err != nil && !ok {
		return 0, false // not the backend's answer (a stopped agent, a misuse)
	}
	if began || !errors.Is(err, llm.ErrConnection) {
		o.reachedLocked(now, err == nil || began)
		if ra := llm.RetryAfter(err); ra > 0 && (errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrOverloaded)) {
			return o.pauseLocked(now, now.Add(min(ra, o.max))), false
		}
		return 0, false
	}
	for r := range o.runs {
		if !r.answered && r.err == nil && r.firstFail.IsZero() {
			r.firstFail = now
		}
	}
	if gen == o.gen {
		// The first failure since the last pause began: pause everyone,
		// twice as long as last time.
		o.gen++
		o.connFails++
		first = o.connFails == 1
		d := o.max
		if n := o.connFails - 1; n < 32 && o.base<<n > 0 && o.base<<n < d {
			d = o.base << n
		}
		d = min(d, maxConnPause)
		for r := range o.runs {
			if !r.answered && r.err == nil && o.window > 0 {
				// Try again when the run's start window ends, not later.
				d = max(min(d, r.firstFail.Add(o.window).Sub(now)), time.Millisecond)
			}
		}
		pause = o.pauseLocked(now, now.Add(d))
	}
	if o.window == 0 || o.connectedLocked(now) {
		return pause, first
	}
	for r := range o.runs {
		if !r.answered && r.err == nil && now.Sub(r.firstFail) >= o.window {
			o.declareLocked(r, now, err)
		}
	}
	return pause, first
}

// connectedLocked reports whether a call admitted at least connectTime
// ago is still in flight.
func (o *outage) connectedLocked(now time.Time) bool {
	for _, t := range o.inflight {
		if now.Sub(t) >= connectTime {
			return true
		}
	}
	return false
}

// gaveUp is told that an agent of run r failed with err after its outage
// budget: if err is a connection failure and no call got an answer in the
// run, the backend is declared down at once, so that the agent's input
// stays pending like the others'. It returns the run's unavailability
// error, or nil.
func (o *outage) gaveUp(r *outageRun, err error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if errors.Is(err, llm.ErrConnection) && !r.answered && o.window > 0 && r.err == nil {
		o.declareLocked(r, time.Now(), err)
	}
	return r.err
}

func (o *outage) declareLocked(r *outageRun, now time.Time, err error) {
	since := time.Duration(0)
	if !r.firstFail.IsZero() {
		since = now.Sub(r.firstFail)
	}
	r.err = fmt.Errorf("%w: no answer in %v since the first connection failure, and none before in this run: %v",
		ErrBackendUnavailable, since.Round(time.Millisecond), err)
	close(r.down)
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
