package progress

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mattn/go-runewidth"
)

// openPTY opens a pseudo-terminal cols columns wide: the master end, read
// by the test, and the terminal end, drawn on. It skips the test where
// the system has none.
func openPTY(t *testing.T, cols uint16) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
			return errno
		}
		return nil
	}
	var unlock int32
	var n uint32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Skipf("unlock the pseudo-terminal: %v", err)
	}
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Skipf("name the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	size := struct{ rows, cols, x, y uint16 }{rows: 24, cols: cols}
	if err := ioctl(tty, syscall.TIOCSWINSZ, unsafe.Pointer(&size)); err != nil {
		t.Fatalf("size the pseudo-terminal: %v", err)
	}
	return master, tty
}

// TestProgressOnTerminal draws on a real (pseudo-)terminal 40 columns
// wide: the display finds it is one, draws a live line no wider than the
// terminal however long its text (the bar and the percentage kept, the
// label dropped), and prints a line written to the
// Writer meanwhile whole, above the live line; once stopped, the live
// line is gone and writes go to the terminal directly.
func TestProgressOnTerminal(t *testing.T) {
	const cols = 40
	master, tty := openPTY(t, cols)
	var got bytes.Buffer
	read := make(chan struct{})
	go func() { // ends when the terminal end closes (EIO)
		defer close(read)
		_, _ = io.Copy(&got, master)
	}()
	w := NewWriter(tty)
	d := Start(w, Config{Every: 10 * time.Millisecond, Source: func() Counters {
		return Counters{Label: "a label long enough to need truncating", Done: 5, Total: 100, Parts: []string{"agents 12"}}
	}})
	if !d.Live() {
		d.Stop()
		t.Fatal("Start on a terminal drew no live line")
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := w.Write([]byte("a log line written meanwhile\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	d.Stop()
	if _, err := w.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	<-read
	text := ansi.ReplaceAllString(got.String(), "")
	drawn := 0
	for l := range strings.SplitSeq(text, "\n") {
		l = strings.Trim(l, "\r") // a redraw begins with "\r" (termWriter)
		if w := runewidth.StringWidth(l); w > cols {
			t.Errorf("line of width %d on a terminal of %d: %q", w, cols, l)
		}
		if strings.HasPrefix(l, "[") && strings.Contains(l, "] 5% 5/100 · ") {
			drawn++
		}
	}
	if drawn == 0 {
		t.Errorf("no live line drawn:\n%q", text)
	}
	if !strings.Contains(text, "a log line written meanwhile\r\n") {
		t.Errorf("the log line is not whole on a line of its own:\n%q", text)
	}
	if !strings.HasSuffix(text, "after\r\n") {
		t.Errorf("output ends %q, want the line written after Stop last", text[max(len(text)-80, 0):])
	}
}
