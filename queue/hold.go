package queue

import (
	"context"
	"time"
)

// hold adds t to the tasks held, and reports false when it was held
// already.
func (w *Worker) hold(t Task) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.held[t.ID]; ok {
		return false
	}
	w.held[t.ID] = t
	return true
}

func (w *Worker) unhold(t Task) {
	w.mu.Lock()
	delete(w.held, t.ID)
	w.mu.Unlock()
	select {
	case w.freed <- struct{}{}:
	default: // a signal is pending already
	}
}

func (w *Worker) heldCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

// heldIDs returns the entry IDs of the tasks held.
func (w *Worker) heldIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.held))
	for id := range w.held {
		ids = append(ids, id)
	}
	return ids
}

// releaseHeld releases what is still held once the agents have ended
// (nothing, unless a result could not be handled), and counts the tasks
// it could not release.
func (w *Worker) releaseHeld() {
	w.mu.Lock()
	tasks := make([]Task, 0, len(w.held))
	for _, t := range w.held {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	for _, t := range tasks {
		ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
		if err := w.q.Release(ctx, w.cfg.ID, t); err != nil {
			w.unreleased.Add(1)
		} else {
			w.released.Add(1)
		}
		cancel()
	}
}

// cadence is how often a worker heartbeats and touches the tasks it
// holds, for a visibility timeout: it beats every few seconds (a heartbeat
// lives for ttl), and touches every third of the visibility timeout so
// that no other worker reclaims a live agent.
type cadence struct {
	beat, touch, ttl time.Duration
}

func cadenceOf(visibility time.Duration) cadence {
	beat := min(2*time.Second, visibility/3)
	return cadence{beat: beat, touch: visibility / 3, ttl: 3*beat + time.Second}
}

// run calls step at once and then every c.beat, until ctx ends; touch is
// true on the first step and then every c.touch (every c.touch/c.beat
// steps, rounded: counted in steps, not measured, so that a step that
// comes a little early or late never skips a touch).
func (c cadence) run(ctx context.Context, step func(touch bool)) {
	tick := time.NewTicker(c.beat)
	defer tick.Stop()
	touchEvery := max(1, int((c.touch+c.beat/2)/c.beat))
	for n := 0; ; n++ {
		step(n%touchEvery == 0)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// every says when something done every d is due.
type every struct {
	d    time.Duration
	last time.Time // when it was last due; zero: never
}

// due reports whether d has passed since it was last due (always, the
// first time), and if so counts it as done now.
func (e *every) due() bool {
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < e.d {
		return false
	}
	e.last = now
	return true
}

// heartbeat beats with the number of agents held, and touches the tasks
// held, at the cadence of the visibility timeout until ctx ends.
func (w *Worker) heartbeat(ctx context.Context) {
	c := cadenceOf(w.cfg.Visibility)
	c.run(ctx, func(touch bool) {
		bctx, cancel := context.WithTimeout(ctx, redisOpTimeout)
		defer cancel()
		if err := w.q.Beat(bctx, w.cfg.ID, w.heldCount(), c.ttl); err != nil && ctx.Err() == nil {
			w.logger.Warn("heartbeat", "err", err)
		}
		if !touch {
			return
		}
		if ids := w.heldIDs(); len(ids) > 0 {
			if err := w.q.Touch(bctx, w.cfg.ID, ids); err != nil && ctx.Err() == nil {
				w.logger.Warn("touch tasks", "err", err)
			}
		}
	})
}
