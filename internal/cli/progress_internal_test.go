package cli

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/batchagent/batchagent"
)

// ansi matches the terminal control sequences mpb writes between frames.
var ansi = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// syncBuffer is a bytes.Buffer safe for mpb's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgressFitsWidth: every line the progress display draws fits the
// width it is given, however long the text, and shows agents admitted and
// model calls in flight.
func TestProgressFitsWidth(t *testing.T) {
	for _, width := range []int{20, 40, 80, 200} {
		var mu sync.Mutex
		st := batchagent.Stats{Started: 40, Done: 7, OK: 6, Failed: 1, Inflight: 12, Limit: 16, Waiting: 3}
		stats := func() batchagent.Stats {
			mu.Lock()
			defer mu.Unlock()
			return st
		}
		var out syncBuffer
		refresh := make(chan any)
		r := newReporter(stats, 100_000, &out, width, refresh, nil)
		for i := range 5 {
			mu.Lock()
			st.Done += int64(i * 1000)
			st.Usage.PromptTokens += 123_456
			mu.Unlock()
			refresh <- time.Now()
		}
		r.stop()
		text := ansi.ReplaceAllString(out.String(), "")
		lines := 0
		for l := range strings.SplitSeq(text, "\n") {
			if l == "" {
				continue
			}
			lines++
			if w := runewidth.StringWidth(l); w > width {
				t.Errorf("width %d: line of width %d: %q", width, w, l)
			}
			if strings.Contains(l, "\r") {
				t.Errorf("width %d: line holds a carriage return: %q", width, l)
			}
		}
		if lines == 0 {
			t.Errorf("width %d: nothing drawn", width)
		}
		if width >= 80 && (!strings.Contains(text, "agents 33") || !strings.Contains(text, "calls 12/16 (+3 waiting)")) {
			t.Errorf("width %d: progress lacks agents admitted and calls in flight:\n%s", width, text)
		}
	}
}

// TestProgressNotOnPipes: when stderr is not a terminal, nothing periodic
// is drawn: no reporter starts, and the summary alone is printed.
func TestProgressNotOnPipes(t *testing.T) {
	var buf bytes.Buffer
	if r := startReporter(nil, 10, &buf, nil); r != nil {
		r.stop()
		t.Fatal("startReporter on a buffer started a progress display, want none")
	}
}

// TestProgressKeepsLogLines: a line written to stderr while the progress
// display is drawn is printed above it, whole, and not to the raw stderr
// under the display.
func TestProgressKeepsLogLines(t *testing.T) {
	var out, raw syncBuffer
	refresh := make(chan any)
	r := newReporter(func() batchagent.Stats { return batchagent.Stats{Started: 2} }, 10, &out, 60, refresh, nil)
	sw := &stderrWriter{base: &raw}
	sw.route(r.p)
	r.unroute = func() { sw.route(nil) }
	refresh <- time.Now()
	wrote := make(chan error, 1)
	go func() {
		_, err := sw.Write([]byte("level=WARN msg=\"queue probe failed\"\n"))
		wrote <- err
	}()
	for done := false; !done; {
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case refresh <- time.Now():
		}
	}
	refresh <- time.Now()
	r.stop()
	if _, err := sw.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	text := ansi.ReplaceAllString(out.String(), "")
	if !strings.Contains(text, "level=WARN msg=\"queue probe failed\"\n") {
		t.Errorf("display output lacks the log line:\n%q", text)
	}
	if raw.String() != "after\n" {
		t.Errorf("raw stderr = %q, want only what was written after the display stopped", raw.String())
	}
}
