package progress

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// DefaultEvery is how often a live line reads its source and is redrawn.
const DefaultEvery = 200 * time.Millisecond

// Config says what a Display draws and how often.
type Config struct {
	// Source returns the run's counters. The display calls it every tick
	// from its own goroutine, so it must be safe to call while the run
	// goes on.
	Source func() Counters
	// Every is how often a live line reads Source and is redrawn.
	// Defaults to DefaultEvery.
	Every time.Duration
	// LogEvery is how often a display off a terminal prints a line (each
	// ending with a newline, with no carriage return or escape sequence).
	// Defaults to 0: none, the caller's summary alone is printed.
	LogEvery time.Duration
	// LogFirst is when a display off a terminal prints its first line, so
	// that a short run's log shows it started. Defaults to
	// DefaultLogFirst, or LogEvery when that is shorter.
	LogFirst time.Duration
}

// DefaultLogFirst is when a display off a terminal prints its first line
// (Config.LogFirst).
const DefaultLogFirst = 3 * time.Second

// Display draws a run's progress from Start to Stop: a live line on a
// terminal, or periodic lines elsewhere. It owns its goroutines (and
// mpb's): Stop ends them.
type Display struct {
	p      *mpb.Progress // nil: no live line
	bar    *mpb.Bar
	routed *Writer // the Writer whose writes go through p; nil: none
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once // ends the live line once
	stop   sync.Once // stops once
}

// Start draws c's counters on w until Stop. When w (or, w being a Writer,
// the stream under it) is a terminal, it draws a live line at the
// terminal's width, redrawn in place every c.Every, and while it does,
// what is written to w (when a Writer) is printed above the line.
// Elsewhere it prints a line every c.LogEvery, if at all. The caller must
// call Stop.
func Start(w io.Writer, c Config) *Display {
	if f, ok := Base(w).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return start(w, c, f, 0, nil)
	}
	return start(w, c, nil, 0, nil)
}

// start is Start drawing the live line on live, or no live line when live
// is nil. width, when not 0, is the width to draw at when live is not a
// terminal; refresh, when not nil, redraws the line each time it receives
// (both for tests).
func start(w io.Writer, c Config, live io.Writer, width int, refresh <-chan any) *Display {
	if c.Every <= 0 {
		c.Every = DefaultEvery
	}
	d := &Display{done: make(chan struct{})}
	begin := time.Now()
	if live == nil {
		if c.LogEvery > 0 {
			if c.LogFirst <= 0 {
				c.LogFirst = min(DefaultLogFirst, c.LogEvery)
			}
			d.wg.Go(func() {
				next := time.NewTimer(c.LogFirst)
				defer next.Stop()
				for {
					select {
					case <-d.done:
						return
					case <-next.C:
					}
					fmt.Fprintln(w, c.Source().Line(time.Since(begin)))
					next.Reset(c.LogEvery)
				}
			})
		}
		return d
	}
	opts := []mpb.ContainerOption{mpb.WithConsoleWriter(newTermWriter(live)), mpb.WithRefreshRate(c.Every)}
	if width > 0 {
		opts = append(opts, mpb.WithWidth(width))
	}
	if refresh != nil {
		opts = append(opts, mpb.WithManualRefresh(refresh))
	}
	d.p = mpb.New(opts...)
	var snap atomic.Pointer[Counters]
	// The line, bar included, is the one decorator's: fitted to the
	// terminal's width as read at each redraw, one column spare so that
	// no terminal wraps it.
	text := decor.Any(func(st decor.Statistics) string {
		return snap.Load().Fit(time.Since(begin), max(st.AvailableWidth-1, 1))
	})
	// Made with no total, the bar never completes by itself (Stop removes
	// it).
	d.bar = d.p.New(0, mpb.NopStyle(), mpb.AppendDecorators(text), mpb.BarFillerTrim())
	set := func(cs Counters) {
		snap.Store(&cs)
		d.bar.SetCurrent(cs.Done) // a change to redraw
	}
	set(c.Source())
	if rw, ok := w.(*Writer); ok {
		rw.route(d.p)
		d.routed = rw
	}
	// Ctrl-C ends the live line at once, before the command's own handler
	// prints that it stops (or, if that handler's message comes first, it
	// is printed above the line, which then goes). The terminal echoes
	// "^C" on the line below the live line: each redraw and the last
	// erase begin with a carriage return (termWriter), and end clears
	// that line.
	sigs := make(chan os.Signal, 1) // one is enough: the line ends at the first
	signal.Notify(sigs, os.Interrupt)
	d.wg.Go(func() {
		defer signal.Stop(sigs)
		select {
		case <-d.done:
		case <-sigs:
			d.end(live)
		}
	})
	d.wg.Go(func() {
		tick := time.NewTicker(c.Every)
		defer tick.Stop()
		for {
			select {
			case <-d.done:
				return
			case <-tick.C:
			}
			set(c.Source())
		}
	})
	return d
}

// Live reports whether d draws a live line (its stream is a terminal).
func (d *Display) Live() bool { return d.p != nil }

// Stop ends d's goroutines and removes the live line (a SIGINT removes it
// sooner); writes to the Writer go to the stream again. It prints no last
// line: the caller prints its summary. Calls after the first do nothing.
func (d *Display) Stop() {
	d.stop.Do(func() {
		close(d.done)
		d.wg.Wait()
		d.end(nil)
	})
}

// end removes the live line (if any) and sends the Writer's writes to the
// stream again; then, with live not nil, clears the line the cursor is on
// (where the terminal echoed "^C"). The writes to the Writer meanwhile
// wait. Calls after the first do nothing.
func (d *Display) end(live io.Writer) {
	d.once.Do(func() {
		remove := func() {
			if d.p != nil {
				d.bar.Abort(true)
				d.p.Wait()
			}
			if live != nil {
				_, _ = io.WriteString(live, "\r\x1b[K")
			}
		}
		if d.routed != nil {
			d.routed.unrouteAfter(remove)
			return
		}
		remove()
	})
}
