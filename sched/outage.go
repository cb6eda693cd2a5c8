package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnavailable is wrapped by the error of a [Run] that declared its
// backend down: no call was answered while the run was registered, and
// connections failed for the start window ([GateConfig.StartWindow]), or
// the caller gave up on a connection failure ([Gate.GaveUp]).
var ErrUnavailable = errors.New("backend unavailable")

// Defaults of the outage handling of a [Gate].
const (
	// DefaultPauseBase is the first pause of admission after a connection
	// failure; each further failure doubles it.
	DefaultPauseBase = 50 * time.Millisecond
	// DefaultPauseMax caps the pause a backend asks for (Retry-After) and
	// the pauses after connection failures, which never exceed five
	// seconds anyway.
	DefaultPauseMax = 30 * time.Second
	// DefaultStartWindow is the start window a caller should set in
	// [GateConfig.StartWindow] unless it has a shorter budget for
	// outages: how long connection failures may last, from the first,
	// before a run that was never answered declares the backend down.
	DefaultStartWindow = 10 * time.Second
	// FirstWindow caps the start window while the gate's backend has never
	// answered a call, in any run: connections refused from the very
	// first call are a wrong address (or a server not started) far more
	// often than a restart, so such a run stops within about a second,
	// naming the failure. Once the backend answered, later runs wait the
	// whole start window.
	FirstWindow = time.Second
)

// maxConnPause caps the global pause after connection failures, so that
// admission tries the backend again at least this often while it is down.
const maxConnPause = 5 * time.Second

// connectTime is how long a call may stay in flight before it counts as
// connected: a refused or reset connection fails well within it. The
// backend is not declared down while a call admitted this long ago is
// still in flight: it may be a slow first answer; a call that hangs on an
// unreachable host fails at its dial timeout, and the failures after it
// then declare the backend down.
const connectTime = 2 * time.Second

// outage is a gate's view of the backend's health: a global pause after
// congestion answers that ask for a wait (Retry-After) and after
// connection failures, and the detection, per run, of a backend that is
// unreachable from the run's start.
type outage struct {
	base, max time.Duration // back-off of the pause after connection failures
	window    time.Duration // start window; zero: no detection

	mu        sync.Mutex           // protects the fields below
	until     time.Time            // admission paused until then
	gen       uint64               // connection pauses begun so far
	connFails int                  // consecutive connection pauses, for the back-off
	served    time.Time            // when a call last succeeded or began its answer
	calls     uint64               // calls admitted so far: the next call's id
	inflight  map[uint64]time.Time // admitted calls not yet ended, and when each was admitted
	runs      map[*Run]struct{}    // the runs registered
	lastConn  error                // the last connection failure; nil: none yet
	reached   bool                 // the backend answered a call once (see FirstWindow)
}

// Run is one run's view of the backend, from [Gate.BeginRun] to
// [Gate.EndRun]: whether any call was answered while it was registered,
// and whether it declared the backend down. Each run has its own, so that
// a backend that answered an earlier or another run is still found dead by
// a run it never answered, and one run's declaration does not touch
// another's. Its methods are safe for concurrent use.
type Run struct {
	down chan struct{} // closed once err is set

	// Protected by the outage's mu; err is never changed once down is closed.
	answered  bool      // some call was answered during the run
	firstFail time.Time // first connection failure in the run since the last answer
	err       error     // wraps ErrUnavailable once the run declared the backend down
}

// Down returns a channel closed once the run declared the backend down;
// [Run.Err] then returns why.
func (r *Run) Down() <-chan struct{} { return r.down }

// Err returns the error, wrapping [ErrUnavailable], with which the run
// declared the backend down, or nil if it has not.
func (r *Run) Err() error {
	select {
	case <-r.down:
		return r.err // set before down was closed, never changed after
	default:
		return nil
	}
}

func newOutage(base, maxd, window time.Duration) *outage {
	return &outage{base: base, max: maxd, window: window, inflight: map[uint64]time.Time{}, runs: map[*Run]struct{}{}}
}

// begin registers a new run: until end, it learns of every answer and
// connection failure of the backend.
func (o *outage) begin() *Run {
	r := &Run{down: make(chan struct{})}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runs[r] = struct{}{}
	return r
}

// end unregisters r; it reports whether r was registered.
func (o *outage) end(r *Run) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.runs[r]
	delete(o.runs, r)
	return ok
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

// wait blocks while admission is paused. It returns ErrStopped once stop
// is closed (nil: never), or ctx's error.
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
			return ErrStopped
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
	o.reached = true
	if served {
		o.served = now
	}
	for r := range o.runs {
		r.answered, r.firstFail = true, time.Time{}
	}
}

// observe records the outcome of call id, admitted in generation gen.
// began says whether the backend began to answer the call (Answering was
// called): a connection that broke after it is not a failure to reach the
// backend. It returns the pause that the outcome began while admission was
// open, or zero, and whether it is the first connection failure since the
// backend last answered.
func (o *outage) observe(id, gen uint64, began bool, out Outcome) (pause time.Duration, first bool) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.inflight, id)
	if out.Signal == SignalAbandoned {
		return 0, false // nothing learnt about the backend
	}
	if began || out.Signal != SignalConnection {
		o.reachedLocked(now, out.Signal == SignalOK || began)
		if out.Signal == SignalCongested && out.RetryAfter > 0 {
			return o.pauseLocked(now, now.Add(min(out.RetryAfter, o.max))), false
		}
		return 0, false
	}
	if out.Err != nil {
		o.lastConn = out.Err
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
				d = max(min(d, r.firstFail.Add(o.windowLocked()).Sub(now)), time.Millisecond)
			}
		}
		pause = o.pauseLocked(now, now.Add(d))
	}
	if o.window == 0 || o.connectedLocked(now) {
		return pause, first
	}
	for r := range o.runs {
		if !r.answered && r.err == nil && now.Sub(r.firstFail) >= o.windowLocked() {
			o.declareLocked(r, now, out.Err)
		}
	}
	return pause, first
}

// windowLocked returns the start window in force: FirstWindow at most
// until the backend answered once.
func (o *outage) windowLocked() time.Duration {
	if o.reached {
		return o.window
	}
	return min(o.window, FirstWindow)
}

// connectedLocked reports whether a call admitted at least connectTime
// ago (or the start window in force, when shorter) is still in flight.
func (o *outage) connectedLocked(now time.Time) bool {
	d := min(connectTime, o.windowLocked())
	for _, t := range o.inflight {
		if now.Sub(t) >= d {
			return true
		}
	}
	return false
}

// gaveUp declares the backend down for r at once when connection is set,
// no call was answered in r and detection is on. It returns r's error.
func (o *outage) gaveUp(r *Run, connection bool, cause error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if connection && !r.answered && o.window > 0 && r.err == nil {
		if o.lastConn != nil && !r.firstFail.IsZero() {
			cause = o.lastConn // named as such: the caller's may be only the deadline that ended it
		}
		o.declareLocked(r, time.Now(), cause)
	}
	return r.err
}

// Unreached reports whether connections to the backend failed during run
// r and no call was answered in it: the state in which [Gate.GaveUp]
// declares the backend unavailable. A caller whose own calls were cut by
// a deadline while they waited for admission, paused by those failures,
// gives up as on a connection failure when it is.
func (g *Gate) Unreached(r *Run) bool {
	o := g.out
	o.mu.Lock()
	defer o.mu.Unlock()
	return !r.answered && !r.firstFail.IsZero()
}

func (o *outage) declareLocked(r *Run, now time.Time, cause error) {
	since := time.Duration(0)
	if !r.firstFail.IsZero() {
		since = now.Sub(r.firstFail)
	}
	last := "a connection failure"
	if cause != nil {
		last = cause.Error()
	}
	r.err = fmt.Errorf("%w: no answer in %v since the first connection failure, and none before in this run: %s",
		ErrUnavailable, since.Round(time.Millisecond), last)
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
