package sched

import (
	"fmt"
	"sync"
	"time"
)

// AIMDConfig configures an [AIMD] controller. Max is required.
type AIMDConfig struct {
	// Min is the lowest limit. Defaults to 1.
	Min int
	// Max is the highest limit. Required.
	Max int
	// Initial is the starting limit. Defaults to Max.
	Initial int
	// SlowStart grows the limit by one per clean completion (doubling it
	// every window) until the first congestion signal or EndSlowStart, as
	// TCP does, so a backend of unknown capacity is probed quickly without
	// a first burst at the maximum.
	SlowStart bool
}

// AIMD adapts a [Scheduler]'s limit to the backend: additive increase
// (+1 after a window of clean completions as large as the limit),
// multiplicative decrease (halve on a congestion signal such as a rate
// limit or an overload).
//
// Like TCP, it decreases at most once per window: a call reports the epoch
// it was admitted in ([AIMD.Epoch]), and a congestion signal from a call
// admitted before the last decrease is ignored, since that call was sent
// under the old limit. It is safe for concurrent use.
type AIMD struct {
	s        *Scheduler
	min, max int

	mu      sync.Mutex // protects the fields below
	limit   int
	clean   int    // clean completions since the last change
	epoch   uint64 // number of decreases so far
	slow    bool   // in slow start
	changes []Change
}

// Change records the limit set at a moment.
type Change struct {
	At    time.Time
	Limit int
}

// NewAIMD returns a controller that sets s's limit, starting at
// cfg.Initial. It returns an error if the configuration is inconsistent.
func NewAIMD(s *Scheduler, cfg AIMDConfig) (*AIMD, error) {
	if cfg.Min == 0 {
		cfg.Min = 1
	}
	if cfg.Initial == 0 {
		cfg.Initial = cfg.Max
	}
	if cfg.Min < 1 || cfg.Max < cfg.Min || cfg.Initial < cfg.Min || cfg.Initial > cfg.Max {
		return nil, fmt.Errorf("sched: AIMD limits must satisfy 1 ≤ min ≤ initial ≤ max, got min %d initial %d max %d", cfg.Min, cfg.Initial, cfg.Max)
	}
	a := &AIMD{s: s, min: cfg.Min, max: cfg.Max, limit: cfg.Initial, slow: cfg.SlowStart}
	a.changes = []Change{{At: time.Now(), Limit: cfg.Initial}}
	s.SetLimit(cfg.Initial)
	return a, nil
}

// Epoch identifies the current limit for calls admitted now; pass it to
// Observe when the call ends.
func (a *AIMD) Epoch() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.epoch
}

// Observe records the outcome of one call admitted in epoch: congested
// reports a rate limit or an overload. It adjusts the scheduler's limit
// when a window is full, or on congestion from a call admitted since the
// last decrease.
func (a *AIMD) Observe(epoch uint64, congested bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if congested {
		if epoch < a.epoch {
			return // sent under the limit already decreased
		}
		a.epoch++
		a.slow = false
		a.setLocked(max(a.min, a.limit/2), now)
		return
	}
	a.clean++
	if (a.slow || a.clean >= a.limit) && a.limit < a.max {
		a.setLocked(a.limit+1, now)
	}
}

// EndSlowStart stops slow start: from now on the limit grows by one per
// window. Call it when another signal (a backend's growing queue) says
// capacity is reached.
func (a *AIMD) EndSlowStart() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.slow = false
}

func (a *AIMD) setLocked(n int, now time.Time) {
	a.clean = 0
	if n == a.limit {
		return
	}
	a.limit = n
	a.changes = append(a.changes, Change{At: now, Limit: n})
	a.s.SetLimit(n)
}

// Limit returns the current limit.
func (a *AIMD) Limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

// Decreases returns how many times the limit was decreased.
func (a *AIMD) Decreases() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.epoch)
}

// History returns the limit's changes in order, starting with the initial
// limit. The returned slice is the caller's.
func (a *AIMD) History() []Change {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Change(nil), a.changes...)
}
