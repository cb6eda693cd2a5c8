package cli

import (
	"io"
	"sync"
)

// stderrWriter is stderr as the commands and the logger write to it.
// While a progress display is drawn, writes go through the display, which
// prints them above its line, so that a log line or a message neither
// breaks the line nor is erased by its next redraw. It is safe for
// concurrent use.
type stderrWriter struct {
	base io.Writer // the real stderr

	mu  sync.Mutex // protects via
	via io.Writer  // the progress display while it is drawn; nil: base
}

// Write writes p through the progress display while there is one, else
// (or once the display is gone) to stderr.
func (w *stderrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	via := w.via
	w.mu.Unlock()
	if via != nil {
		if n, err := via.Write(p); err == nil {
			return n, nil
		}
	}
	return w.base.Write(p)
}

// route sends writes through via; nil sends them to stderr again.
func (w *stderrWriter) route(via io.Writer) {
	w.mu.Lock()
	w.via = via
	w.mu.Unlock()
}

// baseWriter returns the writer under w: stderr itself.
func baseWriter(w io.Writer) io.Writer {
	if sw, ok := w.(*stderrWriter); ok {
		return sw.base
	}
	return w
}
