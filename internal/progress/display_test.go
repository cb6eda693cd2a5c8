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
		if width >= 200 && !strings.Contains(text, "failed 1 · agents 33 · calls 12/16 (+3 waiting)") {
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
	for !strings.Contains(out.String(), " 3/1000 ") {
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

// TestLine: what a plain line (off a terminal) says for each kind of
// run: everything, no bar.
func TestLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Counters
		want string
	}{
		{"nothing yet", Counters{}, "done 0 · 0.0 items/s · failed 0"},
		{"engine run", Counters{Done: 30, Failed: 2, Restored: 10, Total: 50, Unit: "agents", Parts: []string{"agents 4"},
			HasUsage: true, Usage: llm.Usage{PromptTokens: 12_000, CompletionTokens: 400}, Cost: 0.01, CostKnown: true},
			"60% 30/50 · 2.0 agents/s · ETA 10s · failed 2 · $0.0100 so far · agents 4 · tokens 12.4k"},
		{"projected cost", Counters{Done: 10, Total: 40, Cost: 0.01, CostKnown: true, Projected: 0.04},
			"25% 10/40 · 1.0 items/s · ETA 30s · failed 0 · $0.0100 so far · ~$0.0400 projected"},
		{"estimated total", Counters{Label: "batchagent: job", Done: 10, Total: 40, Estimated: true},
			"batchagent: job: 25% 10/~40 · 1.0 items/s · ETA 30s · failed 0"},
		{"all done: no ETA", Counters{Label: "batch b in_progress", Done: 40, Total: 40, Unit: "requests"},
			"batch b in_progress: 100% 40/40 · 4.0 requests/s · failed 0"},
	} {
		if got := tt.c.Line(10 * time.Second); got != tt.want {
			t.Errorf("%s: Line = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestFit: the live line at 60, 80 and 200 columns (and narrower): the
// percentage and the ETA first at every width, the cost next, the
// internals only where they fit, never wider than the width.
func TestFit(t *testing.T) {
	c := Counters{Done: 4500, Failed: 3, Total: 10_000, Unit: "agents", Parts: []string{"agents 33 running", "calls 12/16 (+3 waiting)"},
		HasUsage: true, Usage: llm.Usage{PromptTokens: 1_234_567, CompletionTokens: 45_000}, Cost: 0.1234, CostKnown: true, Projected: 0.2742}
	const elapsed = 100 * time.Second // 45.0 agents/s, 5500 left: ETA 2m2s
	for _, tt := range []struct {
		width int
		want  string
	}{
		{200, "[===========>----------------] 45% 4500/10000 · 45.0 agents/s · ETA 2m2s · failed 3 · $0.1234 so far · ~$0.2742 projected · agents 33 running · calls 12/16 (+3 waiting) · tokens 1.3M"},
		{80, "[===>------] 45% 4500/10000 · 45.0/s · ETA 2m2s · failed 3 · $0.1234 (~$0.2742)"},
		{60, "45% 4500/10000 · 45.0/s · ETA 2m2s · failed 3 · $0.1234"},
		{40, "45% 4500/10000 · ETA 2m2s · failed 3"},
		{30, "45% 4500/10000 · ETA 2m2s"},
		{20, "45% · ETA 2m2s"},
		{12, "45% · ETA 2…"},
	} {
		got := c.Fit(elapsed, tt.width)
		if got != tt.want {
			t.Errorf("Fit(%d) =\n%q\nwant\n%q", tt.width, got, tt.want)
		}
		if w := runewidth.StringWidth(got); w > tt.width {
			t.Errorf("Fit(%d) is %d columns wide: %q", tt.width, w, got)
		}
	}
	// Every width from 20 to 200 keeps the percentage and the ETA.
	for width := 14; width <= 200; width++ {
		got := c.Fit(elapsed, width)
		if runewidth.StringWidth(got) > width || !strings.Contains(got, "45%") || !strings.Contains(got, "ETA 2m2s") {
			t.Errorf("Fit(%d) = %q, want the percentage and the ETA within the width", width, got)
		}
	}
	// An unknown total: the count and the rate, no percentage or ETA.
	u := Counters{Done: 120, Unit: "agents", Parts: []string{"agents 4"}}
	if got, want := u.Fit(10*time.Second, 60), "done 120 · 12.0 agents/s · failed 0 · agents 4"; got != want {
		t.Errorf("Fit of an unknown total = %q, want %q", got, want)
	}
}

// TestBar: the bar's filler at its ends and between.
func TestBar(t *testing.T) {
	for _, tt := range []struct {
		done, total int64
		want        string
	}{{0, 10, "[--------]"}, {5, 10, "[===>----]"}, {10, 10, "[========]"}, {20, 10, "[========]"}} {
		if got := Bar(tt.done, tt.total, 10); got != tt.want {
			t.Errorf("Bar(%d, %d, 10) = %q, want %q", tt.done, tt.total, got, tt.want)
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

// TestProgressFirstLineSoon: off a terminal, the first plain line comes
// at LogFirst, long before LogEvery, so that a short run's log shows it
// started.
func TestProgressFirstLineSoon(t *testing.T) {
	var out syncBuffer
	d := Start(&out, Config{LogEvery: time.Hour, LogFirst: 10 * time.Millisecond, Source: func() Counters {
		return Counters{Done: 5, Total: 10, Unit: "agents"}
	}})
	deadline := time.Now().Add(5 * time.Second)
	for out.String() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	d.Stop()
	if got := out.String(); !strings.HasPrefix(got, "50% 5/10 · ") || strings.Count(got, "\n") != 1 {
		t.Errorf("output = %q, want one plain line with the percentage", got)
	}
}

// TestFitMediaTokens: a run that sent media shows their tokens beside
// the total, where the tokens fit.
func TestFitMediaTokens(t *testing.T) {
	c := Counters{Done: 5, Total: 10, Unit: "agents", HasUsage: true,
		Usage: llm.Usage{PromptTokens: 11_270, CompletionTokens: 450, MediaTokens: 4_250}}
	if got, want := c.Fit(time.Second, 200), "tokens 11.7k (media 4250)"; !strings.HasSuffix(got, want) {
		t.Errorf("Fit(200) = %q, want it to end in %q", got, want)
	}
	c.Usage.MediaTokens = 0
	if got := c.Fit(time.Second, 200); strings.Contains(got, "media") {
		t.Errorf("Fit(200) = %q for a text-only run, want no media", got)
	}
}
