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

// Class is a waiter's priority class: a waiter of a higher class is always
// served before any waiter of a lower one.
type Class int

// The classes.
const (
	// Batch is the class of bulk work.
	Batch Class = 0
	// Interactive is the class of work someone waits for.
	Interactive Class = 1
)

// numClasses is the number of classes.
const numClasses = 2

// Scheduler is a priority counting semaphore with a limit that can change
// while it is in use. It is safe for concurrent use. Every successful
// [Scheduler.Acquire] must be matched by exactly one [Scheduler.Release].
//
// Waiters are served by class first (see [Class]); within a class, the
// flows with waiters take turns (round robin: a flow is a job, so two jobs
// sharing the slots progress at the same rate whatever their sizes);
// within a flow, by priority and arrival (see the package doc).
type Scheduler struct {
	boost time.Duration
	start time.Time

	mu       sync.Mutex // protects the fields below
	limit    int        // current number of slots; math.MaxInt when unlimited
	inflight int        // slots held
	waiting  int        // waiters in all flows
	classes  [numClasses]classQueue
	seq      uint64 // arrival counter, for FIFO among equal keys
}

// classQueue is the waiters of one class: the flows that have waiters, in
// the order they take turns.
type classQueue struct {
	ring  []*flowQueue // flows with waiters; the head is served next
	flows map[uint64]*flowQueue
}

// flowQueue is the waiters of one flow of a class.
type flowQueue struct {
	id      uint64
	waiters waitHeap
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
	s := &Scheduler{boost: cfg.Boost, start: time.Now(), limit: limit}
	for i := range s.classes {
		s.classes[i].flows = map[uint64]*flowQueue{}
	}
	return s, nil
}

// waiter is one blocked Acquire.
type waiter struct {
	key   int64 // arrival time in ns since start, minus the priority credit
	seq   uint64
	flow  *flowQueue
	class Class
	ready chan struct{} // closed when the slot is granted
	index int           // position in the flow's heap; -1 once removed
}

// Acquire is AcquireFlow in flow 0.
func (s *Scheduler) Acquire(ctx context.Context, class Class, priority int) error {
	return s.AcquireFlow(ctx, class, 0, priority)
}

// AcquireFlow blocks until a slot is free and it is the caller's turn, or
// ctx is done. class and flow place the caller (see [Scheduler]);
// priority orders the waiters of a flow: higher is served first (see the
// package doc for how waiting time counts). On success the caller holds
// one slot and must call Release; on failure it returns ctx.Err() and
// holds nothing. A class out of range counts as the nearest one.
func (s *Scheduler) AcquireFlow(ctx context.Context, class Class, flow uint64, priority int) error {
	class = min(max(class, 0), numClasses-1)
	s.mu.Lock()
	if s.inflight < s.limit && s.waiting == 0 {
		s.inflight++
		s.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	cq := &s.classes[class]
	fq := cq.flows[flow]
	if fq == nil {
		fq = &flowQueue{id: flow}
		cq.flows[flow] = fq
		cq.ring = append(cq.ring, fq)
	}
	w := &waiter{
		key:   int64(time.Since(s.start)) - int64(priority)*int64(s.boost),
		seq:   s.seq,
		flow:  fq,
		class: class,
		ready: make(chan struct{}),
	}
	s.seq++
	heap.Push(&fq.waiters, w)
	s.waiting++
	s.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&w.flow.waiters, w.index)
			s.waiting--
			s.dropIfEmptyLocked(w.class, w.flow)
			s.mu.Unlock()
			return ctx.Err()
		}
		s.mu.Unlock()
		// The slot was granted while we were leaving: hand it on.
		s.Release()
		return ctx.Err()
	}
}

// dropIfEmptyLocked removes fq from its class once it has no waiters.
func (s *Scheduler) dropIfEmptyLocked(class Class, fq *flowQueue) {
	if len(fq.waiters) > 0 {
		return
	}
	cq := &s.classes[class]
	delete(cq.flows, fq.id)
	for i, f := range cq.ring {
		if f == fq {
			cq.ring = append(cq.ring[:i], cq.ring[i+1:]...)
			break
		}
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
	st := Stats{Limit: s.limit, Inflight: s.inflight, Waiting: s.waiting}
	if st.Limit == math.MaxInt {
		st.Limit = 0
	}
	return st
}

// grantLocked hands free slots to the best waiters: the highest class with
// waiters, its flow whose turn it is, that flow's best waiter. s.mu must
// be held.
func (s *Scheduler) grantLocked() {
	for s.inflight < s.limit && s.waiting > 0 {
		c := Class(numClasses - 1)
		for len(s.classes[c].ring) == 0 {
			c--
		}
		cq := &s.classes[c]
		fq := cq.ring[0]
		w := heap.Pop(&fq.waiters).(*waiter)
		s.waiting--
		s.inflight++
		if len(fq.waiters) == 0 {
			delete(cq.flows, fq.id)
			cq.ring = cq.ring[1:]
		} else if len(cq.ring) > 1 {
			// Its turn is over: to the back of the ring.
			copy(cq.ring, cq.ring[1:])
			cq.ring[len(cq.ring)-1] = fq
		}
		close(w.ready)
	}
}

// waitHeap orders waiters by key, then arrival.
type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
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
