package outfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
)

// ErrClosed is returned by [Writer.Write] after [Writer.Close]. Its text,
// like the other errors of the writer, keeps the "sink:" prefix that the
// run's messages have always shown.
var ErrClosed = errors.New("sink: closed")

// flushEvery bounds how long a written result may sit in the buffer.
const flushEvery = 100 * time.Millisecond

// Writer writes the results file: one JSON object per result and line.
// It is safe for concurrent use. Lines are buffered and reach the underlying writer at
// most 100ms after they are written, however quiet the run is afterwards:
// a timer armed by the first line of an empty buffer flushes it.
type Writer struct {
	mu      sync.Mutex // protects the fields below
	bw      *bufio.Writer
	ordered bool
	pending map[int]batchagent.Result // ordered mode: results waiting for earlier ones
	next    int                       // ordered mode: next index to write
	written int
	flush   *time.Timer  // armed while lines wait in bw; nil when none is armed
	closed  bool         // Close was called: the timer must not touch bw
	err     error        // first write error; later writes are refused
	skip    map[int]bool // indexes already in the output (a resumed run)
	cost    func(batchagent.Result) (float64, bool)
	line    []byte // the line being encoded, reused
}

// NewWriter returns a writer to w. With ordered, results are buffered and
// written in input order (memory grows with how far completion runs ahead
// of the slowest earlier input); otherwise each is written as soon as it is
// given. The caller keeps ownership of w and closes it after Close; w is
// written from a timer's goroutine too, never concurrently.
func NewWriter(w io.Writer, ordered bool) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10), ordered: ordered, pending: map[int]batchagent.Result{}}
}

// Skip marks indexes already present in the output, as a resumed run
// finds them: results with these indexes are not written again, and in
// ordered mode they count as written. Call it before the first Write.
func (s *Writer) Skip(indexes map[int]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skip = indexes
	for s.skip[s.next] {
		s.next++
	}
}

// SetCost makes each line carry "cost": cost(r) as its last member, for
// the results whose cost reports true; the others are written as they
// are. Call it before the first Write. The cost must be a finite number.
func (s *Writer) SetCost(cost func(batchagent.Result) (float64, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cost = cost
}

// Write writes r (or, in ordered mode, buffers it until the results before
// it are written). The line reaches the underlying writer within 100ms;
// call Flush to force it sooner. It returns the first error met writing,
// by this call or an earlier write or flush, or [ErrClosed] after Close.
func (s *Writer) Write(r batchagent.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return ErrClosed
	}
	if s.skip[r.Index] {
		return nil
	}
	if !s.ordered {
		s.writeLocked(r)
	} else {
		s.pending[r.Index] = r
		for {
			p, ok := s.pending[s.next]
			if !ok {
				break
			}
			delete(s.pending, s.next)
			s.next++
			for s.skip[s.next] {
				s.next++
			}
			s.writeLocked(p)
		}
	}
	if s.err == nil && s.flush == nil && s.bw.Buffered() > 0 {
		s.armFlushLocked()
	}
	return s.err
}

// armFlushLocked starts the timer that flushes the lines now buffered.
func (s *Writer) armFlushLocked() {
	var t *time.Timer
	t = time.AfterFunc(flushEvery, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.flush != t || s.closed {
			return // flushed already (stopped too late to stay silent) or closed
		}
		s.flushLocked() // an error is returned by the next Write or Close
	})
	s.flush = t
}

func (s *Writer) writeLocked(r batchagent.Result) {
	if s.err != nil {
		return
	}
	b, err := r.AppendJSON(s.line[:0])
	if err != nil {
		s.err = fmt.Errorf("sink: encode result %d: %w", r.Index, err)
		return
	}
	if cap(b) <= 64<<10 {
		s.line = b // a rare huge line is not kept
	}
	if s.cost != nil {
		if c, ok := s.cost(r); ok {
			b = appendMember(b, "cost", c)
		}
	}
	if _, err := s.bw.Write(b); err != nil {
		s.err = fmt.Errorf("sink: write: %w", err)
		return
	}
	if err := s.bw.WriteByte('\n'); err != nil {
		s.err = fmt.Errorf("sink: write: %w", err)
		return
	}
	s.written++
}

// Flush writes buffered lines to the underlying writer. It returns the
// first error met writing.
func (s *Writer) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
	return s.err
}

// flushLocked flushes bw and disarms the flush timer; a timer already
// firing finds nothing to do.
func (s *Writer) flushLocked() {
	if s.flush != nil {
		s.flush.Stop()
		s.flush = nil
	}
	if s.err != nil {
		return
	}
	if err := s.bw.Flush(); err != nil {
		s.err = fmt.Errorf("sink: write: %w", err)
	}
}

// Close writes what is still buffered, in ordered mode including results
// whose predecessors never arrived (a cancelled run), in index order, and
// flushes. Once it has returned the underlying writer is not written again
// (a later Write returns [ErrClosed]), so the caller may close it. It
// returns the first error met writing.
func (s *Writer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if len(s.pending) > 0 {
		idx := make([]int, 0, len(s.pending))
		for i := range s.pending {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			s.writeLocked(s.pending[i])
			delete(s.pending, i)
		}
	}
	s.flushLocked()
	return s.err
}

// Written returns the number of lines written so far.
func (s *Writer) Written() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// AppendCost returns the result line line (one JSON object, without its
// newline) with "cost": cost as its last member, as [Writer.SetCost] writes
// it: for lines written by another process (a worker's), priced where they
// are collected. A line that is not an object is returned unchanged.
func AppendCost(line []byte, cost float64) []byte { return appendMember(line, "cost", cost) }

// appendMember returns the JSON object b with the member "name": v added
// last.
func appendMember(b []byte, name string, v float64) []byte {
	end := bytes.LastIndexByte(b, '}')
	if end < 0 {
		return b // not an object: MarshalJSON always writes one
	}
	head := bytes.TrimRight(b[:end], " \t\r\n")
	out := append(make([]byte, 0, len(b)+32), head...)
	if len(head) > 0 && head[len(head)-1] != '{' {
		out = append(out, ',')
	}
	out = strconv.AppendQuote(out, name)
	out = append(out, ':')
	out = strconv.AppendFloat(out, v, 'g', -1, 64)
	return append(out, b[end:]...)
}
