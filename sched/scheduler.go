package sched

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// DefaultBoost is the arrival credit per priority level, in rounds; see
// [Config.Boost].
const DefaultBoost = 256

// roundUnit is one round of the scheduler's clock in its fixed-point
// units: each grant advances the clock by roundUnit / limit.
const roundUnit = 1 << 20

// Config configures a [Scheduler]. The zero value is valid.
type Config struct {
	// Limit is the number of slots. Zero means unlimited.
	Limit int
	// Boost is the arrival credit of one priority level, in rounds: a
	// waiter of priority p is served as if it had arrived p×Boost rounds
	// earlier (under PolicyTurns). A round passes each time the scheduler
	// has granted as many slots as its limit, so while the slots are full
	// a round lasts about as long as one call: the credit is worth the
	// same number of calls whether a call takes 30 ms or 30 s. Defaults to
	// DefaultBoost.
	Boost int
	// Policy orders the waiters of a flow. Defaults to PolicyTurns.
	Policy Policy
}

// Policy orders the waiters of one flow for a slot (see [Order]). Whatever
// the policy, a waiter whose [Order.Continuing] is set goes before those
// whose is not, and equal keys are served in arrival order.
type Policy uint8

// The policies.
const (
	// PolicyTurns serves by arrival less a credit of Boost rounds per
	// priority level ([Order.Priority]): an agent that has done more turns
	// goes first, and waiting long enough beats any priority.
	PolicyTurns Policy = iota
	// PolicyFIFO serves in arrival order; priorities are ignored.
	PolicyFIFO
	// PolicyLAS serves the least attained service first: the waiter with
	// the least [Order.Attained] (model time received so far) goes first.
	PolicyLAS
)

// policyNames are the policies' names, by value.
var policyNames = [...]string{PolicyTurns: "turns", PolicyFIFO: "fifo", PolicyLAS: "las"}

// String returns the policy's name: "turns", "fifo" or "las".
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy returns the policy named name ("turns", "fifo" or "las"),
// or an error that lists the names.
func ParsePolicy(name string) (Policy, error) {
	for i, n := range policyNames {
		if n == name {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("sched: unknown policy %q (known: turns, fifo, las)", name)
}

// Order places one waiter among the waiters of its flow, as the
// scheduler's [Policy] reads it. The zero value is a plain waiter.
type Order struct {
	// Priority is the waiter's priority level (PolicyTurns): higher goes
	// first.
	Priority int
	// Attained is the service the caller has received so far
	// (PolicyLAS): less goes first.
	Attained time.Duration
	// Continuing puts the waiter before every waiter of its flow that is
	// not continuing: a caller whose state the backend probably still
	// holds (an agent back from a short tool call, whose prompt prefix is
	// still cached) goes while it does.
	Continuing bool
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
	boost  int64 // Config.Boost in the clock's units
	policy Policy

	mu       sync.Mutex // protects the fields below
	limit    int        // current number of slots; math.MaxInt when unlimited
	inflight int        // slots held
	waiting  int        // waiters in all flows
	classes  [numClasses]classQueue
	seq      uint64 // arrival counter, for FIFO among equal keys
	// clock counts rounds in units of 1/roundUnit: each grant adds
	// roundUnit/limit. Waiting is measured on it, not in wall time, so
	// that the order of the waiters does not depend on how long calls
	// take.
	clock int64
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
	if cfg.Boost < 0 || cfg.Boost > math.MaxInt32 {
		return nil, fmt.Errorf("sched: boost %d out of range [0, %d]", cfg.Boost, math.MaxInt32)
	}
	if int(cfg.Policy) >= len(policyNames) {
		return nil, fmt.Errorf("sched: unknown policy %d", cfg.Policy)
	}
	if cfg.Boost == 0 {
		cfg.Boost = DefaultBoost
	}
	limit := cfg.Limit
	if limit == 0 {
		limit = math.MaxInt
	}
	s := &Scheduler{boost: int64(cfg.Boost) * roundUnit, policy: cfg.Policy, limit: limit}
	for i := range s.classes {
		s.classes[i].flows = map[uint64]*flowQueue{}
	}
	return s, nil
}

// waiter is one blocked Acquire.
type waiter struct {
	hot   bool  // Order.Continuing: before every waiter that is not
	key   int64 // by the policy: arrival on the clock less the priority credit, or attained service
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

// AcquireFlow is AcquireOrder with an Order of priority alone.
func (s *Scheduler) AcquireFlow(ctx context.Context, class Class, flow uint64, priority int) error {
	return s.AcquireOrder(ctx, class, flow, Order{Priority: priority})
}

// AcquireOrder blocks until a slot is free and it is the caller's turn,
// or ctx is done. class and flow place the caller (see [Scheduler]); o
// orders the waiters of a flow, as the scheduler's [Policy] reads it (see
// the package doc for how waiting time counts). On success the caller
// holds one slot and must call Release; on failure it returns ctx.Err()
// and holds nothing. A class out of range counts as the nearest one.
func (s *Scheduler) AcquireOrder(ctx context.Context, class Class, flow uint64, o Order) error {
	class = min(max(class, 0), numClasses-1)
	s.mu.Lock()
	if s.inflight < s.limit && s.waiting == 0 {
		s.inflight++
		s.tickLocked()
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
		hot:   o.Continuing,
		key:   s.key(o),
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

// key is the heap key of a waiter arriving now with o. s.mu must be held.
func (s *Scheduler) key(o Order) int64 {
	switch s.policy {
	case PolicyFIFO:
		return 0 // arrival order alone: waiters tie, seq decides
	case PolicyLAS:
		return int64(o.Attained)
	default:
		// Priorities whose credit would not fit in a quarter of the key's
		// range rank as the highest (or, negative, the lowest) that does:
		// no overflow.
		p := int64(o.Priority)
		if s.boost > 0 {
			limit := math.MaxInt64 / 4 / s.boost
			p = min(max(p, -limit), limit)
		}
		return s.clock - p*s.boost
	}
}

// tickLocked advances the clock by one grant. s.mu must be held.
func (s *Scheduler) tickLocked() {
	if s.limit != math.MaxInt {
		s.clock += roundUnit / int64(s.limit)
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
		s.tickLocked()
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

// waitHeap orders waiters continuing first, then by key, then arrival.
type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if h[i].hot != h[j].hot {
		return h[i].hot
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
