package progress

import (
	"io"
	"sync"
)

// Writer is a stream (the commands' stderr) that a Display may draw on.
// While a live line is drawn, writes go through the display, which prints
// them above its line, so that a log line or a message neither breaks the
// line nor is erased by its next redraw; otherwise they go to the stream
// itself. It is safe for concurrent use.
type Writer struct {
	base io.Writer // the stream itself

	mu  sync.RWMutex // protects via; held for reading while writing through it
	via io.Writer    // the live display while it is drawn; nil: base
}

// NewWriter returns a Writer on base.
func NewWriter(base io.Writer) *Writer { return &Writer{base: base} }

// Write writes p through the live display while there is one, else (or
// once the display is gone) to the stream.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.via != nil {
		if n, err := w.via.Write(p); err == nil {
			return n, nil
		}
	}
	return w.base.Write(p)
}

// Base returns the stream under w.
func (w *Writer) Base() io.Writer { return w.base }

// route sends writes through via; nil sends them to the stream again.
func (w *Writer) route(via io.Writer) {
	w.mu.Lock()
	w.via = via
	w.mu.Unlock()
}

// unrouteAfter holds w's writes back while it calls f, then sends them
// to the stream again.
func (w *Writer) unrouteAfter(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
	w.via = nil
}

// Base returns the stream under w when w is a Writer, else w itself.
func Base(w io.Writer) io.Writer {
	if pw, ok := w.(*Writer); ok {
		return pw.base
	}
	return w
}
