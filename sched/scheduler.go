package sched

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// DefaultBoost is the arrival credit per priority level; see [Config.Boost].
const DefaultBoost = 10 * time.Second

// Config configures a [Scheduler]. The zero value is valid.
type Config struct {
	// Limit is the number of slots. Zero means unlimited.
	Limit int
	// Boost is the arrival credit of one priority level: a waiter of
	// priority p is served as if it had arrived p×Boost earlier. Defaults to
	// DefaultBoost.
	Boost time.Duration
}

// Scheduler is a priority counting semaphore with a limit that can change
// while it is in use. It is safe for concurrent use. Every successful
// [Scheduler.Acquire] must be matched by exactly one [Scheduler.Release].
type Scheduler struct {
	boost time.Duration
	start time.Time

	mu       sync.Mutex // protects the fields below
	limit    int        // current number of slots; math.MaxInt when unlimited
	inflight int        // slots held
	waiters  waitHeap
	seq      uint64 // arrival counter, for FIFO among equal keys
}

// New returns a Scheduler. It returns an error if cfg.Limit or cfg.Boost is
// negative.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Limit < 0 {
		return nil, fmt.Errorf("sched: negative limit %d", cfg.Limit)
	}
	if cfg.Boost < 0 {
		return nil, fmt.Errorf("sched: negative boost %v", cfg.Boost)
	}
	if cfg.Boost == 0 {
		cfg.Boost = DefaultBoost
	}
	limit := cfg.Limit
	if limit == 0 {
		limit = math.MaxInt
	}
	return &Scheduler{boost: cfg.Boost, start: time.Now(), limit: limit}, nil
}

// Class is a priority class. A waiter of a higher class is always served
// before any waiter of a lower one, however long that one has waited;
// priority (and waiting time, see the package doc) orders waiters within a
// class. Any int is a valid class; the package names two.
type Class int

// The priority classes batchagent uses.
const (
	// Batch is the class of bulk work: runs over many inputs.
	Batch Class = 0
	// Interactive is the class of work someone is waiting for; it
	// overtakes every Batch waiter.
	Interactive Class = 1
)

// waiter is one blocked Acquire.
type waiter struct {
	class Class
	key   int64 // arrival time in ns since start, minus the priority credit
	seq   uint64
	ready chan struct{} // closed when the slot is granted
	index int           // position in the heap; -1 once removed
}

// Acquire blocks until a slot is free and it is the caller's turn, or ctx
// is done. Waiters of a higher class are served first; within a class,
// priority orders them: higher is served first (see the package doc for how
// waiting time counts). On success the caller holds one slot and must call
// Release; on failure it returns ctx.Err() and holds nothing.
func (s *Scheduler) Acquire(ctx context.Context, class Class, priority int) error {
	s.mu.Lock()
	if s.inflight < s.limit && len(s.waiters) == 0 {
		s.inflight++
		s.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	w := &waiter{
		class: class,
		key:   int64(time.Since(s.start)) - int64(priority)*int64(s.boost),
		seq:   s.seq,
		ready: make(chan struct{}),
	}
	s.seq++
	heap.Push(&s.waiters, w)
	s.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&s.waiters, w.index)
			s.mu.Unlock()
			return ctx.Err()
		}
		s.mu.Unlock()
		// The slot was granted while we were leaving: hand it on.
		s.Release()
		return ctx.Err()
	}
}

// Release returns a slot acquired with Acquire and wakes the next waiter.
// It panics if no slot is held, which is a caller bug.
func (s *Scheduler) Release() {
	s.mu.Lock()
	if s.inflight <= 0 {
		s.mu.Unlock()
		panic("sched: Release without Acquire")
	}
	s.inflight--
	s.grantLocked()
	s.mu.Unlock()
}

// SetLimit changes the number of slots; zero means unlimited. Lowering it
// never interrupts calls in flight: it takes effect as they release.
// Negative values are treated as 1.
func (s *Scheduler) SetLimit(n int) {
	s.mu.Lock()
	switch {
	case n == 0:
		n = math.MaxInt
	case n < 0:
		n = 1
	}
	s.limit = n
	s.grantLocked()
	s.mu.Unlock()
}

// Limit returns the current number of slots; zero means unlimited.
func (s *Scheduler) Limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit == math.MaxInt {
		return 0
	}
	return s.limit
}

// Stats is a snapshot of a Scheduler.
type Stats struct {
	Limit    int // zero means unlimited
	Inflight int // slots held
	Waiting  int // callers blocked in Acquire
}

// Stats returns a snapshot of the scheduler's state.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Limit: s.limit, Inflight: s.inflight, Waiting: len(s.waiters)}
	if st.Limit == math.MaxInt {
		st.Limit = 0
	}
	return st
}

// grantLocked hands free slots to the best waiters. s.mu must be held.
func (s *Scheduler) grantLocked() {
	for s.inflight < s.limit && len(s.waiters) > 0 {
		w := heap.Pop(&s.waiters).(*waiter)
		s.inflight++
		close(w.ready)
	}
}

// waitHeap orders waiters by class (highest first), then key, then
// arrival.
type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if h[i].class != h[j].class {
		return h[i].class > h[j].class
	}
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	w.index = -1
	*h = old[:n-1]
	return w
}
