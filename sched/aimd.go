package sched

import (
	"fmt"
	"sync"
	"time"
)

// DefaultCooldown is how long after a decrease further congestion signals
// are ignored; see [AIMDConfig.Cooldown].
const DefaultCooldown = time.Second

// AIMDConfig configures an [AIMD] controller. Max is required.
type AIMDConfig struct {
	// Min is the lowest limit. Defaults to 1.
	Min int
	// Max is the highest limit. Required.
	Max int
	// Initial is the starting limit. Defaults to Max.
	Initial int
	// Cooldown: after a decrease, congestion signals are ignored for this
	// long, so a burst of throttled calls that were all in flight together
	// halves the limit once, not once each. Defaults to DefaultCooldown.
	Cooldown time.Duration
}

// AIMD adapts a [Scheduler]'s limit to the backend: additive increase
// (+1 after a window of clean completions as large as the limit),
// multiplicative decrease (halve on a congestion signal such as a rate
// limit or an overload). It is safe for concurrent use.
type AIMD struct {
	s        *Scheduler
	min, max int
	cooldown time.Duration

	mu        sync.Mutex // protects the fields below
	limit     int
	clean     int       // clean completions since the last change
	lastDrop  time.Time // when the limit was last decreased
	changes   []Change
	decreases int
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
	if cfg.Cooldown == 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.Min < 1 || cfg.Max < cfg.Min || cfg.Initial < cfg.Min || cfg.Initial > cfg.Max || cfg.Cooldown < 0 {
		return nil, fmt.Errorf("sched: AIMD limits must satisfy 1 ≤ min ≤ initial ≤ max, got min %d initial %d max %d", cfg.Min, cfg.Initial, cfg.Max)
	}
	a := &AIMD{s: s, min: cfg.Min, max: cfg.Max, cooldown: cfg.Cooldown, limit: cfg.Initial}
	a.changes = []Change{{At: time.Now(), Limit: cfg.Initial}}
	s.SetLimit(cfg.Initial)
	return a, nil
}

// Observe records the outcome of one call: congested reports a rate limit
// or an overload. It adjusts the scheduler's limit when a window is full
// or on congestion outside the cooldown.
func (a *AIMD) Observe(congested bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if congested {
		a.clean = 0
		if !a.lastDrop.IsZero() && now.Sub(a.lastDrop) < a.cooldown {
			return
		}
		a.lastDrop = now
		a.decreases++
		a.setLocked(max(a.min, a.limit/2), now)
		return
	}
	a.clean++
	if a.clean >= a.limit && a.limit < a.max {
		a.setLocked(a.limit+1, now)
	}
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
	return a.decreases
}

// History returns the limit's changes in order, starting with the initial
// limit. The returned slice is the caller's.
func (a *AIMD) History() []Change {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Change(nil), a.changes...)
}
