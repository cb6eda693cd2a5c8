package progress

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/batchagent/batchagent/llm"
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

// TestProgressFitsWidth: every line the live display draws fits the width
// it is given, however long the text, and holds no carriage return.
func TestProgressFitsWidth(t *testing.T) {
	for _, width := range []int{20, 40, 80, 200} {
		var mu sync.Mutex
		c := Counters{Done: 7, Failed: 1, Total: 100_000, Unit: "agents", Parts: []string{"agents 33", "calls 12/16 (+3 waiting)"}, HasUsage: true}
		source := func() Counters {
			mu.Lock()
			defer mu.Unlock()
			return c
		}
		var out syncBuffer
		refresh := make(chan any)
		d := start(&out, Config{Source: source}, &out, width, refresh)
		for i := range 5 {
			mu.Lock()
			c.Done += int64(i * 1000)
			c.Usage.PromptTokens += 123_456
			mu.Unlock()
			refresh <- time.Now()
		}
		d.Stop()
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
		if width >= 80 && !strings.Contains(text, "done 7/100000 · failed 1 · agents 33 · calls 12/16 (+3 waiting)") {
			t.Errorf("width %d: the line lacks its counts:\n%s", width, text)
		}
	}
}

// TestProgressNotOnPipes: off a terminal, a display draws no live line,
// and with no LogEvery prints nothing at all.
func TestProgressNotOnPipes(t *testing.T) {
	var buf syncBuffer
	d := Start(&buf, Config{Source: func() Counters { return Counters{Done: 1} }, Every: time.Millisecond})
	time.Sleep(20 * time.Millisecond)
	d.Stop()
	if d.Live() {
		t.Error("Start on a buffer drew a live line, want none")
	}
	if s := buf.String(); s != "" {
		t.Errorf("Start on a buffer printed %q, want nothing", s)
	}
}

// TestProgressLinesOffTerminal: off a terminal, the periodic lines end
// with a newline each, with no carriage return or escape sequence: a log
// reads one line per report, none glued to the next.
func TestProgressLinesOffTerminal(t *testing.T) {
	var out syncBuffer
	w := NewWriter(&out)
	var mu sync.Mutex
	var done int64
	d := Start(w, Config{LogEvery: 5 * time.Millisecond, Source: func() Counters {
		mu.Lock()
		defer mu.Unlock()
		done++
		return Counters{Label: "batch b1 in_progress", Done: done, Total: 1000, Unit: "requests"}
	}})
	for !strings.Contains(out.String(), "done 3/1000") {
		time.Sleep(5 * time.Millisecond)
	}
	d.Stop()
	if _, err := w.Write([]byte("batch b1 completed\n")); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.ContainsAny(text, "\r\x1b") {
		t.Errorf("output holds a carriage return or an escape sequence:\n%q", text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "batch b1 ") || strings.Count(l, "batch") != 1 {
			t.Errorf("line %d = %q, want one report alone", i+1, l)
		}
	}
	if !strings.HasSuffix(text, "\n") || lines[len(lines)-1] != "batch b1 completed" {
		t.Errorf("output = %q, want the last line whole after the reports", text)
	}
}

// TestProgressKeepsLogLines: a line written to the Writer while the live
// line is drawn is printed above it, whole, and not to the stream under
// the display; once the display stops, writes go to the stream again.
func TestProgressKeepsLogLines(t *testing.T) {
	var out, raw syncBuffer
	refresh := make(chan any)
	sw := NewWriter(&raw)
	d := start(sw, Config{Source: func() Counters { return Counters{Parts: []string{"agents 2"}} }}, &out, 60, refresh)
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
	d.Stop()
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

// TestLine: what a line says for each kind of run.
func TestLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Counters
		want string
	}{
		{"nothing yet", Counters{}, "done 0 · failed 0 · 0.0 items/s"},
		{"engine run", Counters{Done: 30, Failed: 2, Restored: 10, Total: 50, Unit: "agents", Parts: []string{"agents 4"},
			HasUsage: true, Usage: llm.Usage{PromptTokens: 12_000, CompletionTokens: 400}, Cost: "$0.0100 so far"},
			"done 30/50 · failed 2 · agents 4 · 2.0 agents/s · ETA 10s · tokens 12.4k · $0.0100 so far"},
		{"estimated total", Counters{Label: "batchagent: job", Done: 10, Total: 40, Estimated: true},
			"batchagent: job: done 10/~40 · failed 0 · 1.0 items/s · ETA 30s"},
		{"all done: no ETA", Counters{Label: "batch b in_progress", Done: 40, Total: 40, Unit: "requests"},
			"batch b in_progress: done 40/40 · failed 0 · 4.0 requests/s"},
	} {
		if got := tt.c.Line(10 * time.Second); got != tt.want {
			t.Errorf("%s: Line = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestCount: compact numbers.
func TestCount(t *testing.T) {
	for n, want := range map[int64]string{950: "950", 9_999: "9999", 12_345: "12.3k", 4_500_000: "4.5M"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
