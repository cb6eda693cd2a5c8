package simhttp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errQueueFull and errStopped end a sequence that never ran to completion.
var (
	errQueueFull = errors.New("simhttp: server queue is full")
	errStopped   = errors.New("simhttp: server stopped")
)

// Queue states of a sequence, guarded by Server.mu.
const (
	seqWaiting  uint8 = iota // in the queue
	seqAdmitted              // taken by the scheduler
	seqLeft                  // left the queue before admission
)

// seq is one request's sequence: its prompt, what it will generate, and
// its progress, published to the request's handler.
type seq struct {
	prompt int      // prompt tokens
	blocks []uint64 // chained hashes of the prompt's full blocks
	total  int      // completion tokens to generate, at least 1

	state uint8 // guarded by Server.mu

	// Owned by the scheduler goroutine.
	left     int  // uncached prompt tokens still to prefill; -1 before the prefill starts
	decoding bool // prefill done: emits a token each step
	held     int  // leading blocks of blocks held in the KV cache
	res      int  // KV cache blocks reserved beyond those held

	gone atomic.Bool // the client went away

	mu      sync.Mutex // protects the fields below
	emitted int        // tokens generated so far
	cached  int        // prompt tokens served from the prefix cache; set once, by plan
	done    bool       // finished or failed
	err     error      // why it failed
	want    int        // the waiting handler sleeps until emitted > want or done
	// notify wakes the handler when emitted passes want or the sequence is
	// done (capacity 1: the handler reads the state under mu, so one
	// pending signal is enough).
	notify chan struct{}
}

func newSeq(prompt int, blocks []uint64, total int) *seq {
	return &seq{prompt: prompt, blocks: blocks, total: max(1, total), left: -1, notify: make(chan struct{}, 1)}
}

// emit records one generated token, which ends the sequence when it is
// the last, and wakes the handler if it waits for it. It reports whether
// the sequence is done.
func (q *seq) emit() (done bool) {
	q.mu.Lock()
	q.emitted++
	q.done = q.emitted >= q.total
	done = q.done
	wake := done || q.emitted > q.want
	q.mu.Unlock()
	if wake {
		q.signal()
	}
	return done
}

// fail ends the sequence with err and wakes its handler.
func (q *seq) fail(err error) {
	q.mu.Lock()
	q.done, q.err = true, err
	q.mu.Unlock()
	q.signal()
}

func (q *seq) signal() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// wait blocks until the sequence has emitted more than have tokens or is
// done, or ctx ends. It returns the tokens emitted, the prompt tokens
// cached, whether the sequence is done, and the error that ended it. One
// goroutine at a time may wait: have is stored in the sequence, so that
// the tokens up to it do not wake the waiter.
func (q *seq) wait(ctx context.Context, have int) (emitted, cached int, done bool, err error) {
	for {
		q.mu.Lock()
		emitted, cached, done, err = q.emitted, q.cached, q.done, q.err
		q.want = have
		q.mu.Unlock()
		if emitted > have || done {
			return emitted, cached, done, err
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			return emitted, cached, false, ctx.Err()
		}
	}
}

// enqueue adds sequences that arrive together to the waiting queue, in
// order: all of them, or none when fewer than len(qs) places are left
// (errQueueFull, counting them all as rejected) or Run has returned
// (errStopped).
func (s *Server) enqueue(qs ...*seq) error {
	s.mu.Lock()
	switch {
	case s.phase == phaseStopped:
		s.mu.Unlock()
		return errStopped
	case s.cfg.MaxQueue >= 0 && s.waiting+len(qs) > s.cfg.MaxQueue:
		s.mu.Unlock()
		s.rejected.Add(int64(len(qs)))
		return errQueueFull
	}
	for _, q := range qs {
		q.state = seqWaiting
	}
	s.queue = append(s.queue, qs...)
	s.waiting += len(qs)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// leave takes q out of the queue, or out of the batch at the next step,
// when its client goes away. It does nothing to a finished sequence.
func (s *Server) leave(q *seq) {
	s.mu.Lock()
	if q.state == seqWaiting {
		q.state = seqLeft
		s.waiting--
	}
	s.mu.Unlock()
	q.gone.Store(true)
}

// Run runs the scheduler loop: the simulated GPU (see [Server] for the
// timing model). It returns nil once ctx is done and the loop has stopped;
// requests still queued or running then fail (503, or a cut stream). It
// returns ErrServerStarted if Run was called before: a server runs once.
// Requests that arrived before Run are served in their arrival order.
// With Config.Batch it opens the Batch API's store first, and returns
// the error if it cannot.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.phase != phaseNew {
		s.mu.Unlock()
		return ErrServerStarted
	}
	s.phase = phaseRunning
	s.mu.Unlock()
	s.cfg.Logger.InfoContext(ctx, "sim server running", "max_seqs", s.cfg.MaxSeqs, "max_queue", s.cfg.MaxQueue,
		"prefix_cache", s.cache != nil)

	var running []*seq
	defer func() { s.stop(running) }()
	if s.batchReady != nil {
		b, err := newBatchMode(s)
		s.batch = b
		close(s.batchReady)
		if err != nil {
			return err
		}
		// Before the scheduler stops: the batches' lines in flight end
		// unrecorded rather than failed.
		defer func() {
			if err := b.close(); err != nil {
				s.cfg.Logger.WarnContext(ctx, "sim batch store", "err", err)
			}
		}()
	}
	timer := time.NewTimer(0)
	timer.Stop() // since Go 1.23 a stopped timer delivers nothing
	defer timer.Stop()
	// due is when the step in progress ends, in simulated time: each step
	// ends its time after the last one's end, not after the timer fired,
	// so that timer lateness does not add up over a busy period (steps
	// only a few hundred microseconds long stay true on a loaded
	// machine). Zero while idle.
	var due time.Time
	for {
		running = s.admit(running)
		if len(running) == 0 {
			due = time.Time{}
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
				continue
			}
		}
		step, members := s.plan(running)
		if due.IsZero() {
			due = time.Now()
		}
		due = due.Add(step)
		timer.Reset(time.Until(due))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		s.busy.Add(int64(step))
		s.service.Add(int64(step) * int64(members))
		running = s.apply(running)
	}
}

// admit drops the sequences whose clients left and fills free slots from
// the queue, in arrival order.
func (s *Server) admit(running []*seq) []*seq {
	kept := running[:0]
	for _, q := range running {
		if !q.gone.Load() {
			kept = append(kept, q)
		} else {
			s.releaseKV(q)
		}
	}
	clear(running[len(kept):])
	running = kept
	s.mu.Lock()
	i := 0
	for ; i < len(s.queue) && len(running) < s.cfg.MaxSeqs; i++ {
		q := s.queue[i]
		if q.state != seqWaiting {
			continue
		}
		if s.cache != nil && !s.reserveKV(q) {
			break // no room in the KV cache until running sequences finish
		}
		q.state = seqAdmitted
		s.waiting--
		running = append(running, q)
	}
	// Also skip the left sequences at the head, so they do not pile up.
	for i < len(s.queue) && s.queue[i].state != seqWaiting {
		i++
	}
	if i > 0 {
		n := copy(s.queue, s.queue[i:])
		clear(s.queue[n:])
		s.queue = s.queue[:n]
	}
	s.mu.Unlock()
	s.running.Store(int64(len(running)))
	return running
}

// plan lays out the next step: it prefills up to chunkTokens prompt tokens
// in admission order (looking prompts up in the prefix cache when their
// prefill starts, and caching their blocks when it finishes) and returns
// the step's time and the number of sequences that take part in it.
func (s *Server) plan(running []*seq) (step time.Duration, members int) {
	budget, prefill, decoding, batch := chunkTokens, 0, 0, 0
	var overhead time.Duration
	for _, q := range running {
		if q.decoding {
			decoding++
			batch++
			continue
		}
		if budget == 0 {
			continue
		}
		if q.left < 0 {
			s.startPrefill(q)
			overhead += s.cfg.CallOverhead
		}
		n := min(budget, q.left)
		q.left -= n
		budget -= n
		prefill += n
		batch++
		if q.left == 0 && s.cache != nil {
			for _, h := range q.blocks[q.held:] {
				s.cache.add(h)
			}
			q.res -= len(q.blocks) - q.held
			q.held = len(q.blocks)
		}
	}
	memory := s.cfg.DecodeStep + time.Duration(batch)*s.cfg.DecodeStepPerSeq
	compute := time.Duration(prefill+decoding) * s.cfg.PrefillPerToken
	return max(memory, compute) + overhead, batch
}

// startPrefill looks q's prompt up in the prefix cache as its prefill
// starts: its cached tokens are its leading blocks cached by then, which
// it holds until it ends, and the rest is prefilled.
func (s *Server) startPrefill(q *seq) {
	cached := 0
	if c := s.cache; c != nil {
		n := c.pin(q.blocks, q.held)
		c.unreserve(n - q.held)
		q.res -= n - q.held
		q.held = n
		cached = min(n*blockTokens, q.prompt-1)
		recomputed := 0
		for _, h := range q.blocks[n:] {
			if c.wasEvicted(h) {
				recomputed += blockTokens
			}
		}
		if recomputed > 0 {
			s.recomputed.Add(int64(recomputed))
			s.lost.Add(1)
		}
	}
	q.left = q.prompt - cached
	q.mu.Lock()
	q.cached = cached
	q.mu.Unlock()
	s.prompt.Add(int64(q.prompt))
	s.cached.Add(int64(cached))
	s.prefilled.Add(int64(q.left))
}

// reserveKV admits q to the KV cache: it holds the cached leading blocks
// of q's prompt and reserves room for the rest of its prompt and its
// completion, evicting unheld blocks as needed. It reports false, holding
// nothing, when the running sequences leave no room.
func (s *Server) reserveKV(q *seq) bool {
	n := s.cache.pin(q.blocks, 0)
	need := blocksFor(q.prompt+q.total) - n
	if !s.cache.reserve(need) {
		s.cache.unpin(q.blocks[:n])
		return false
	}
	q.held, q.res = n, need
	return true
}

// releaseKV gives back what q holds in the KV cache as it ends: its
// prompt's blocks stay cached, evictable.
func (s *Server) releaseKV(q *seq) {
	if s.cache == nil {
		return
	}
	s.cache.unpin(q.blocks[:q.held])
	s.cache.unreserve(q.res)
	q.held, q.res = 0, 0
}

// apply publishes the tokens of the step just run and removes the
// finished sequences.
func (s *Server) apply(running []*seq) []*seq {
	kept := running[:0]
	for _, q := range running {
		switch {
		case q.decoding:
		case q.left == 0:
			q.decoding = true // its prefill's last chunk also samples its first token
		default:
			kept = append(kept, q) // still prefilling
			continue
		}
		s.generated.Add(1) // before the handler can see the token
		if !q.emit() {
			kept = append(kept, q)
		} else {
			s.releaseKV(q)
		}
	}
	clear(running[len(kept):])
	s.running.Store(int64(len(kept)))
	return kept
}

// stop ends Run: queued and running sequences fail with errStopped.
func (s *Server) stop(running []*seq) {
	s.mu.Lock()
	s.phase = phaseStopped
	queue := s.queue
	s.queue, s.waiting = nil, 0
	for _, q := range queue {
		q.state = seqLeft
	}
	s.mu.Unlock()
	s.running.Store(0)
	for _, q := range append(queue, running...) {
		q.fail(errStopped)
	}
}
