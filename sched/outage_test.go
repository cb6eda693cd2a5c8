package sched_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/sched"
	"github.com/google/go-cmp/cmp"
)

var errRefused = errors.New("connect: connection refused")

// refusal is the outcome of a call that could not reach the backend.
var refusal = sched.Outcome{Signal: sched.SignalConnection, Err: errRefused}

// TestRetryAfterPausesEveryAcquire checks that a congestion answer asking
// for a wait pauses admission for every caller for that long (capped by
// PauseMax), and one without a wait pauses no one.
func TestRetryAfterPausesEveryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, PauseMax: 2 * time.Second})
		start := time.Now()
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalCongested, RetryAfter: time.Second})
		var (
			mu       sync.Mutex
			admitted []time.Duration
			wg       sync.WaitGroup
		)
		for range 5 {
			wg.Go(func() {
				tk := admit(t, g)
				mu.Lock()
				admitted = append(admitted, time.Since(start))
				mu.Unlock()
				tk.Release(sched.Outcome{})
			})
		}
		wg.Wait()
		want := []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second}
		if diff := cmp.Diff(want, admitted); diff != "" {
			t.Errorf("admission times after a 1s Retry-After (-want +got):\n%s", diff)
		}
		// A longer wait is capped by PauseMax.
		start = time.Now()
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalCongested, RetryAfter: time.Hour})
		admit(t, g).Release(sched.Outcome{})
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("admitted %v after a 1h Retry-After, want PauseMax 2s", got)
		}
		// Without a wait, or with another signal, no one is paused.
		start = time.Now()
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalCongested})
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalFailed, RetryAfter: time.Minute})
		admit(t, g).Release(sched.Outcome{})
		if got := time.Since(start); got != 0 {
			t.Errorf("admitted %v after congestion without Retry-After and a failure, want at once", got)
		}
	})
}

// TestPauseWhileWaitingForSlot checks that a call granted its slot while
// a pause began gives the slot back and waits for the pause's end.
func TestPauseWhileWaitingForSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 1, Fixed: true})
		hold := admit(t, g)
		start := time.Now()
		admittedAfter := make(chan time.Duration, 1) // the one waiter
		go func() {
			tk := admit(t, g)
			admittedAfter <- time.Since(start)
			tk.Release(sched.Outcome{})
		}()
		synctest.Wait()
		hold.Release(sched.Outcome{Signal: sched.SignalCongested, RetryAfter: time.Second})
		if got := <-admittedAfter; got != time.Second {
			t.Errorf("waiter admitted after %v, want after the 1s pause that began as it got its slot", got)
		}
	})
}

// TestConnectionFailuresBackOff checks that each connection failure
// pauses every caller, twice as long as the last (from PauseBase, never
// above five seconds), that only the first of a series lowers the limit,
// and that an answer starts the series again.
func TestConnectionFailuresBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, PauseBase: 100 * time.Millisecond})
		var gaps []time.Duration
		last := time.Now()
		for range 8 {
			tk := admit(t, g)
			gaps = append(gaps, time.Since(last))
			last = time.Now()
			tk.Release(refusal)
		}
		ms := time.Millisecond
		want := []time.Duration{0, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("waits between calls during an outage (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{16, 8}, limits(g.Stats().LimitHistory)); diff != "" {
			t.Errorf("limit history (-want +got): the first failure only lowers it\n%s", diff)
		}
		// The backend answers, then fails again: a new series.
		tk := admit(t, g)
		tk.Release(sched.Outcome{})
		start := time.Now()
		admit(t, g).Release(refusal)
		admit(t, g).Release(sched.Outcome{})
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("pause after a new failure = %v, want PauseBase 100ms again", got)
		}
		if diff := cmp.Diff([]int{16, 8, 4}, limits(g.Stats().LimitHistory)); diff != "" {
			t.Errorf("limit history (-want +got): a new series lowers it again\n%s", diff)
		}
		if got := g.Stats().Throttles; got != 0 {
			t.Errorf("Throttles = %d, want 0: connection failures are not congestion answers", got)
		}
	})
}

// TestConnectionFailuresOfOneWaveOnePause checks that the failures of
// calls admitted before a pause began do not lengthen it: a wave of calls
// failing together pauses once, for PauseBase.
func TestConnectionFailuresOfOneWaveOnePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, PauseBase: 100 * time.Millisecond})
		var wave []*sched.Ticket
		for range 5 {
			wave = append(wave, admit(t, g))
		}
		start := time.Now()
		for _, tk := range wave {
			tk.Release(refusal)
		}
		admit(t, g).Release(sched.Outcome{})
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("pause after a wave of 5 failures = %v, want one PauseBase, 100ms", got)
		}
		if diff := cmp.Diff([]int{16, 8}, limits(g.Stats().LimitHistory)); diff != "" {
			t.Errorf("limit history (-want +got):\n%s", diff)
		}
	})
}

// failUntil sends calls that fail to connect until r is down or until
// the deadline, and returns how long from the first failure r took to go
// down (or -1).
func failUntil(t *testing.T, g *sched.Gate, r *sched.Run, deadline time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < deadline {
		select {
		case <-r.Down():
			return time.Since(start)
		default:
		}
		admit(t, g).Release(refusal)
	}
	return -1
}

// TestStartWindowDeclaresRunDown checks that a run in which no call was
// answered declares the backend unavailable once connections have failed
// for the start window (the backend answered before the run: the whole
// window), with an error wrapping ErrUnavailable that names the last
// failure; the pauses end at the window's end so that it is not overrun.
func TestStartWindowDeclaresRunDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: sched.DefaultStartWindow})
		admit(t, g).Release(sched.Outcome{}) // answered once, before the run
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		if r.Err() != nil {
			t.Fatalf("Err() of a new run = %v, want nil", r.Err())
		}
		if got := failUntil(t, g, r, time.Minute); got != sched.DefaultStartWindow {
			t.Errorf("run declared down after %v of failures, want the start window %v", got, sched.DefaultStartWindow)
		}
		err := r.Err()
		if !errors.Is(err, sched.ErrUnavailable) || !strings.Contains(err.Error(), errRefused.Error()) || !strings.Contains(err.Error(), "10s") {
			t.Errorf("Err() = %v, want it to wrap ErrUnavailable and name the 10s and the last failure", err)
		}
	})
}

// TestNoStartWindowNeverDeclares checks that without a start window no run
// is declared down.
func TestNoStartWindowNeverDeclares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		if got := failUntil(t, g, r, time.Minute); got != -1 || r.Err() != nil {
			t.Errorf("run without a start window declared down after %v: %v", got, r.Err())
		}
		if err := g.GaveUp(r, true, errRefused); err != nil {
			t.Errorf("GaveUp without a start window = %v, want nil", err)
		}
	})
}

// TestAnsweredRunIsNotDeclared checks that a run in which a call was
// answered is never declared down, while a run begun after that answer,
// which the backend never answered, is.
func TestAnsweredRunIsNotDeclared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: sched.DefaultStartWindow})
		answered := g.BeginRun(t.Context())
		defer g.EndRun(answered)
		admit(t, g).Release(sched.Outcome{})
		fresh := g.BeginRun(t.Context())
		defer g.EndRun(fresh)
		if got := failUntil(t, g, fresh, time.Minute); got != sched.DefaultStartWindow {
			t.Errorf("the unanswered run was declared down after %v, want %v", got, sched.DefaultStartWindow)
		}
		if got := failUntil(t, g, answered, 20*time.Second); got != -1 || answered.Err() != nil {
			t.Errorf("the answered run was declared down after %v: %v", got, answered.Err())
		}
		if err := g.GaveUp(answered, true, errRefused); err != nil {
			t.Errorf("GaveUp on an answered run = %v, want nil", err)
		}
	})
}

// TestAnsweringMarksReachable checks that a call whose answer began is an
// answer: its connection breaking afterwards pauses no one and counts as
// served, and a run that saw it is not declared down.
func TestAnsweringMarksReachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: time.Second})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		if !g.LastAnswer().IsZero() {
			t.Fatalf("LastAnswer() before any answer = %v, want zero", g.LastAnswer())
		}
		tk := admit(t, g)
		time.Sleep(time.Second)
		began := time.Now()
		tk.Answering()
		tk.Answering() // once only
		if got := g.LastAnswer(); got != began {
			t.Errorf("LastAnswer() = %v, want when the answer began, %v", got, began)
		}
		time.Sleep(time.Second)
		cut := time.Now()
		tk.Release(sched.Outcome{Signal: sched.SignalConnection, Err: errors.New("stream ended before [DONE]")})
		if got := g.LastAnswer(); got != cut {
			t.Errorf("LastAnswer() = %v, want when the begun answer ended, %v", got, cut)
		}
		start := time.Now()
		admit(t, g).Release(sched.Outcome{})
		if got := time.Since(start); got != 0 {
			t.Errorf("a call after a cut stream waited %v, want no pause", got)
		}
		if got := failUntil(t, g, r, 10*time.Second); got != -1 {
			t.Errorf("run declared down after %v although a call was answered in it", got)
		}
		// Another failed answer (a 500) reaches the backend but serves nothing.
		served := g.LastAnswer()
		time.Sleep(time.Second)
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalFailed})
		if got := g.LastAnswer(); got != served {
			t.Errorf("LastAnswer() after a failed answer = %v, want unchanged %v", got, served)
		}
	})
}

// TestFailedAnswerRestartsWindow checks that another answer of the backend
// (a server error) shows it reachable: the run's window starts again at
// the next connection failure.
func TestFailedAnswerRestartsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: 2 * time.Second})
		admit(t, g).Release(sched.Outcome{}) // answered once: the whole window applies
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		if got := failUntil(t, g, r, time.Second); got != -1 {
			t.Fatalf("declared down after %v, want not within 1s", got)
		}
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalFailed})
		if got := failUntil(t, g, r, 5*time.Second); got != -1 {
			t.Errorf("run answered by a failure declared down after %v, want never", got)
		}
		// An abandoned call teaches nothing: it answers nothing either.
		fresh := g.BeginRun(t.Context())
		defer g.EndRun(fresh)
		admit(t, g).Release(sched.Outcome{Signal: sched.SignalAbandoned})
		if got := failUntil(t, g, fresh, time.Minute); got != 2*time.Second {
			t.Errorf("run with only an abandoned call declared down after %v, want 2s", got)
		}
	})
}

// TestConnectedCallDelaysDeclaration checks that the backend is not
// declared down while a call admitted more than the connect time ago is
// still in flight (a slow first answer); once it ends, the next failure
// declares it.
func TestConnectedCallDelaysDeclaration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: sched.DefaultStartWindow})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		slow := admit(t, g)
		if got := failUntil(t, g, r, 15*time.Second); got != -1 {
			t.Fatalf("declared down after %v while a call was in flight for longer", got)
		}
		slow.Release(sched.Outcome{Signal: sched.SignalAbandoned})
		admit(t, g).Release(refusal)
		if !errors.Is(r.Err(), sched.ErrUnavailable) {
			t.Errorf("Err() after the slow call ended and one more failure = %v, want ErrUnavailable", r.Err())
		}
	})
}

// TestGaveUpDeclaresAtOnce checks that a caller giving up on a connection
// failure declares its unanswered run down at once, and that a failure of
// another kind does not.
func TestGaveUpDeclaresAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: sched.DefaultStartWindow})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		if err := g.GaveUp(r, false, errors.New("500 internal error")); err != nil {
			t.Errorf("GaveUp on another failure = %v, want nil", err)
		}
		admit(t, g).Release(refusal)
		time.Sleep(time.Second)
		err := g.GaveUp(r, true, errRefused)
		if !errors.Is(err, sched.ErrUnavailable) || !strings.Contains(err.Error(), errRefused.Error()) || !strings.Contains(err.Error(), "1s") {
			t.Errorf("GaveUp(connection) = %v, want ErrUnavailable naming the 1s and the failure", err)
		}
		select {
		case <-r.Down():
		default:
			t.Error("Down() not closed after GaveUp declared the backend down")
		}
		if got := r.Err(); got != err {
			t.Errorf("Err() = %v, want GaveUp's %v", got, err)
		}
		if again := g.GaveUp(r, true, errors.New("other")); again != err {
			t.Errorf("second GaveUp = %v, want the first declaration %v", again, err)
		}
	})
}

// TestFirstWindowBeforeAnyAnswer checks that a backend no call of the
// gate ever reached (a wrong address) is declared unavailable once
// connections have failed for FirstWindow, not the whole start window;
// and that a call still in flight for that long (a slow first answer)
// holds the declaration off.
func TestFirstWindowBeforeAnyAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: sched.DefaultStartWindow})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		if got := failUntil(t, g, r, time.Minute); got != sched.FirstWindow {
			t.Errorf("never-answered backend declared down after %v of failures, want FirstWindow %v", got, sched.FirstWindow)
		}
		if err := r.Err(); !errors.Is(err, sched.ErrUnavailable) || !strings.Contains(err.Error(), errRefused.Error()) {
			t.Errorf("Err() = %v, want it to wrap ErrUnavailable and name the refusal", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, sched.GateConfig{Limit: 16, StartWindow: sched.DefaultStartWindow})
		r := g.BeginRun(t.Context())
		defer g.EndRun(r)
		slow := admit(t, g) // in flight all along
		if got := failUntil(t, g, r, 5*time.Second); got != -1 {
			t.Errorf("declared down after %v while a call was in flight, want not", got)
		}
		slow.Release(sched.Outcome{})
	})
}
