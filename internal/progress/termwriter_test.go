package progress

import (
	"bytes"
	"testing"
)

// TestTermWriterReturnsToColumn0: on a terminal, each frame after the
// first begins with a carriage return before moving up over the last
// one's lines and erasing, so that what the terminal printed on the line
// below (its "^C" echo) cannot shift the erase off column 0; off a
// terminal, frames are written one after the other with no escape.
func TestTermWriterReturnsToColumn0(t *testing.T) {
	var out bytes.Buffer
	w := newTermWriter(&out)
	if w.IsTerminal() {
		t.Fatal("a bytes.Buffer taken for a terminal")
	}
	w.terminal = true // as on a terminal
	for _, frame := range []string{"[--] one\n", "[==] two\n"} {
		_, _ = w.WriteString(frame)
		if err := w.Flush(1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(0); err != nil { // the last: the line removed
		t.Fatal(err)
	}
	want := "[--] one\n\r\x1b[1A\x1b[J[==] two\n\r\x1b[1A\x1b[J"
	if out.String() != want {
		t.Errorf("terminal: wrote %q, want %q", out.String(), want)
	}

	out.Reset()
	w = newTermWriter(&out)
	_, _ = w.WriteString("[--] one\n")
	_ = w.Flush(1)
	_, _ = w.WriteString("[==] two\n")
	_ = w.Flush(1)
	if want := "[--] one\n[==] two\n"; out.String() != want {
		t.Errorf("off a terminal: wrote %q, want %q", out.String(), want)
	}
}
