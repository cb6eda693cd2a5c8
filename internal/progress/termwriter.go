package progress

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// termWriter is the mpb.ConsoleWriter the live line is drawn with: mpb's
// own (cupwriter) but for one byte. Each frame is buffered and written
// at once (Flush), and then the next frame is made to begin by moving the
// cursor back up over this one's lines and erasing to the end of the
// screen, so that it is drawn over it. cupwriter moves up with "ESC[nA"
// alone, which keeps the cursor's column: it assumes the cursor is at
// column 0, where the frame's last newline left it. It is not after
// Ctrl-C: the terminal echoes "^C" there (ECHOCTL), two columns, so the
// next "ESC[nA ESC[J" erased the line from column 2 and left the bar's
// first two columns ("[-") on the screen. termWriter begins each move
// with a carriage return, so that whatever the terminal (or anything
// else) printed on the line below, the erase starts at column 0.
type termWriter struct {
	bytes.Buffer
	out      io.Writer
	fd       int
	terminal bool
}

// newTermWriter returns a termWriter on out; one that moves the cursor
// when out is a terminal, else one that writes the frames one after the
// other (as cupwriter does).
func newTermWriter(out io.Writer) *termWriter {
	w := &termWriter{out: out}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		w.fd, w.terminal = int(f.Fd()), true
	}
	return w
}

// IsTerminal reports whether w's stream is a terminal.
func (w *termWriter) IsTerminal() bool { return w.terminal }

// GetTermSize returns the terminal's width and height.
func (w *termWriter) GetTermSize() (width, height int, err error) {
	return term.GetSize(w.fd)
}

// Flush writes the buffered frame (with a write of its own, which the
// terminal does not interleave with another) and, on a terminal, buffers
// the return to its first line for the next one: "\r", up lines lines
// (none when 0: some terminals read 0 as 1), erase to the end of the
// screen.
func (w *termWriter) Flush(lines int) error {
	if _, err := w.WriteTo(w.out); err != nil {
		return err
	}
	if w.terminal && lines > 0 {
		b := append([]byte("\r\x1b["), strconv.Itoa(lines)...)
		_, _ = w.Write(append(b, "A\x1b[J"...))
	}
	return nil
}
