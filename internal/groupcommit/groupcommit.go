package groupcommit

import (
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by [Writer.Add] after [Writer.Close], and by a
// second Close.
var ErrClosed = errors.New("groupcommit: closed")

// Config configures a [Writer] of items of type T.
type Config[T any] struct {
	// Commit commits a group of items, in one transaction. It is called
	// by the writer goroutine only, one group at a time, in the order the
	// groups were opened. Required.
	Commit func(items []T) error
	// Done, if set, is called by the writer goroutine after each Commit,
	// once the group's Done channel is closed, with the group's items and
	// Commit's error: to answer adders that do not wait on the channel, or
	// give the items' buffers back. It must not block. Defaults to none.
	Done func(items []T, err error)
	// Window is how long the writer lets a group fill when fewer items
	// are waiting than the last group held: the adders of that group are
	// likely to be back. A lone adder (a last group of one) never waits.
	// Zero or negative: never wait.
	Window time.Duration
	// MaxGroup is the most items one group holds. Required (> 0).
	MaxGroup int
}

// Writer commits the items added from many goroutines in groups, one
// transaction per group, on a goroutine of its own that [Writer.Close]
// stops. Items added while a group commits form the next group. It is
// safe for concurrent use.
type Writer[T any] struct {
	cfg     Config[T]
	wake    chan struct{} // cap 1: a group is waiting, is full, or Close was called
	stopped chan struct{} // closed when the writer goroutine has returned

	mu     sync.Mutex
	queue  []*Group[T] // groups not yet taken by the writer; the last one is open
	closed bool
}

// Group is the items of one transaction.
type Group[T any] struct {
	items []T
	want  int // when non-zero, the size at which Add wakes the lingering writer
	done  chan struct{}
	err   error
}

// Done is closed once the group has been committed, or its commit has
// failed.
func (g *Group[T]) Done() <-chan struct{} { return g.done }

// Err returns the group's commit error, once Done is closed.
func (g *Group[T]) Err() error { return g.err }

// Start returns a Writer for cfg and starts its goroutine, which Close
// stops.
func Start[T any](cfg Config[T]) *Writer[T] {
	if cfg.Commit == nil || cfg.MaxGroup <= 0 {
		panic("groupcommit: Start without Commit or MaxGroup")
	}
	w := &Writer[T]{cfg: cfg, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go w.run()
	return w
}

// Add adds it to the open group, which it returns; the group's Done
// channel tells when it has been committed. After Close it returns
// [ErrClosed].
func (w *Writer[T]) Add(it T) (*Group[T], error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, ErrClosed
	}
	var g *Group[T]
	if n := len(w.queue); n > 0 && len(w.queue[n-1].items) < w.cfg.MaxGroup {
		g = w.queue[n-1]
	} else {
		g = &Group[T]{items: make([]T, 0, min(w.cfg.MaxGroup, 64)), done: make(chan struct{})}
		w.queue = append(w.queue, g)
	}
	g.items = append(g.items, it)
	n := len(g.items)
	wake := n == 1 || n == w.cfg.MaxGroup || n == g.want
	w.mu.Unlock()
	if wake {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return g, nil
}

// Closed reports whether Close has been called.
func (w *Writer[T]) Closed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// Close commits the groups waiting, then stops the writer goroutine and
// waits for it. A second Close waits too, and returns [ErrClosed].
func (w *Writer[T]) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.stopped
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.stopped
	return nil
}

// run is the writer goroutine: it commits the queued groups in order, one
// transaction each, until the Writer is closed and the queue is empty.
func (w *Writer[T]) run() {
	defer close(w.stopped)
	var timer *time.Timer
	last := 0 // the size of the last group
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.mu.Unlock()
			<-w.wake
			w.mu.Lock()
		}
		if len(w.queue) == 0 { // closed and drained
			w.mu.Unlock()
			return
		}
		// Let the group fill until it is as large as the last one, or the
		// window ends: the adders of the last group are likely to be back.
		// A lone adder (last group of one) never waits.
		if want := min(last, w.cfg.MaxGroup); w.cfg.Window > 0 && len(w.queue) == 1 && len(w.queue[0].items) < want {
			if timer == nil {
				timer = time.NewTimer(w.cfg.Window)
			} else {
				timer.Reset(w.cfg.Window)
			}
			w.queue[0].want = want
			for len(w.queue) == 1 && len(w.queue[0].items) < want && !w.closed {
				w.mu.Unlock()
				fired := false
				select {
				case <-timer.C:
					fired = true
				case <-w.wake:
				}
				w.mu.Lock()
				if fired {
					break
				}
			}
			timer.Stop()
		}
		g := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()

		last = len(g.items)
		g.err = w.cfg.Commit(g.items)
		close(g.done)
		if w.cfg.Done != nil {
			w.cfg.Done(g.items, g.err)
		}
	}
}
