package progress

import (
	"fmt"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/batchagent/batchagent/llm"
)

// Counters is one reading of what a run has done so far, as the display
// draws it. The zero value is a run that has done nothing yet.
type Counters struct {
	// Label, when set, leads the line: "batch_abc in_progress".
	Label string
	// Done counts the items finished, failed ones included, restored ones
	// too.
	Done int64
	// Failed counts the finished items that failed.
	Failed int64
	// Restored counts the items of Done finished before this run (read
	// back from a state file): they are left out of the rate.
	Restored int64
	// Total is the items the run expects; 0 when not known.
	Total int64
	// Estimated says that Total is an estimate: drawn as "~N".
	Estimated bool
	// Unit names what Done counts, for the rate: "agents" draws
	// "agents/s". Defaults to "items".
	Unit string
	// Parts are the run's internals (agents running, calls in flight),
	// drawn after the cost in order while the width allows: "agents 3",
	// "calls 2/16".
	Parts []string
	// Usage is the tokens spent so far, drawn last when HasUsage is set.
	Usage llm.Usage
	// HasUsage says that Usage is counted (a batch poller does not know
	// it).
	HasUsage bool
	// Cost is the cost so far in dollars, drawn when CostKnown is set.
	Cost float64
	// CostKnown says that Cost is known (the price of the model is).
	CostKnown bool
	// Projected, when above 0, is the projected cost of the whole run.
	Projected float64
}

// Line renders c in full as a plain line (no bar), elapsed being how
// long the run has gone on: the percentage, done of total, the rate, the
// ETA, the failed ones, the cost, the run's internals and the tokens.
func (c Counters) Line(elapsed time.Duration) string {
	return c.fit(elapsed, 0, false)
}

// Fit renders c as the live line draws it at a terminal width columns
// wide: a bar with the percentage, done of total, the rate and the ETA
// first, then the failed ones and the cost, then the run's internals and
// the tokens while the width allows. When the full line is too wide it
// narrows step by step: the tokens and the internals go first (the last
// first), then the label; the cost and the rate are abbreviated (the
// cost to the amount spent); the bar shrinks, then goes; the rate, the cost, the failed count and done of
// total go last.
// The percentage and the ETA stay while any room is left: the result is
// never wider than width (truncated with "…" when even they do not fit).
// A width of 0 or less means no limit.
func (c Counters) Fit(elapsed time.Duration, width int) string {
	return c.fit(elapsed, width, true)
}

// The widths of the bar: at most barMax, and drawn only with barMin
// columns to spare.
const (
	barMax = 30
	barMin = 8
)

// layout is which of a line's fields are drawn, and in which form.
type layout struct {
	noTokens  bool
	parts     int  // how many of Parts are drawn
	noLabel   bool // the label is left out
	shortCost bool // "$0.0123 (~$0.0400)"
	bareCost  bool // "$0.0123"
	noCost    bool
	shortRate bool // "12.3/s"
	noRate    bool
	failedIf  bool // "failed N" only when N > 0
	noFailed  bool
	noBar     bool
	noCount   bool // "45%" alone, not "45% 450/1000"
}

// narrowings are the steps a line takes, one after the other, until it
// fits.
var narrowings = []func(l *layout){
	func(l *layout) { l.noTokens = true },
	// Parts go one by one: narrowPart repeats this step.
	func(l *layout) { l.parts-- },
	func(l *layout) { l.noLabel = true },
	func(l *layout) { l.shortCost = true },
	func(l *layout) { l.shortRate = true },
	func(l *layout) { l.failedIf = true },
	func(l *layout) { l.bareCost = true },
	func(l *layout) { l.noBar = true },
	func(l *layout) { l.noRate = true },
	func(l *layout) { l.noCost = true },
	func(l *layout) { l.noFailed = true },
	func(l *layout) { l.noCount = true },
}

// narrowPart is the index in narrowings of the step that drops a part.
const narrowPart = 1

// fit renders c at width (0: no limit), with a bar when bar is set.
func (c Counters) fit(elapsed time.Duration, width int, bar bool) string {
	l := layout{parts: len(c.Parts), noBar: !bar}
	if width <= 0 {
		return c.render(elapsed, l, 0)
	}
	for step := 0; ; {
		if s, ok := c.renderWithin(elapsed, l, width); ok {
			return s
		}
		if step == len(narrowings) {
			return runewidth.Truncate(c.render(elapsed, l, 0), width, "…")
		}
		narrowings[step](&l)
		if step != narrowPart || l.parts <= 0 {
			step++
		}
	}
}

// renderWithin renders c in layout l within width, giving the bar what
// is left up to barMax; false when it does not fit (or the bar would be
// narrower than barMin).
func (c Counters) renderWithin(elapsed time.Duration, l layout, width int) (string, bool) {
	if l.noBar || c.Total <= 0 {
		s := c.render(elapsed, l, 0)
		return s, runewidth.StringWidth(s) <= width
	}
	rest := runewidth.StringWidth(c.render(elapsed, l, -1))
	bw := min(barMax, width-rest-1)
	if bw < barMin {
		return "", false
	}
	return c.render(elapsed, l, bw), true
}

// render renders c in layout l with a bar bw columns wide: 0 for none, -1
// for none but measured as if there were one (the space after it).
func (c Counters) render(elapsed time.Duration, l layout, bw int) string {
	var rate float64
	if elapsed > 0 {
		rate = float64(c.Done-c.Restored) / elapsed.Seconds()
	}
	unit := c.Unit
	if unit == "" {
		unit = "items"
	}
	var fields []string
	add := func(format string, args ...any) { fields = append(fields, fmt.Sprintf(format, args...)) }
	var b strings.Builder
	if c.Label != "" && !l.noLabel {
		fmt.Fprintf(&b, "%s: ", c.Label)
	}
	switch {
	case bw > 0:
		b.WriteString(Bar(c.Done, c.Total, bw) + " ")
	case bw < 0:
		b.WriteString(" ")
	}
	total := fmt.Sprint(c.Total)
	if c.Estimated {
		total = "~" + total
	}
	pct := min(100*c.Done/max(c.Total, 1), 100)
	switch {
	case c.Total > 0 && l.noCount:
		add("%d%%", pct)
	case c.Total > 0:
		add("%d%% %d/%s", pct, c.Done, total)
	default:
		add("done %d", c.Done)
	}
	if !l.noRate {
		if l.shortRate {
			add("%s/s", rateString(rate))
		} else {
			add("%s %s/s", rateString(rate), unit)
		}
	}
	if c.Total > 0 && rate > 0 && c.Done < c.Total {
		eta := time.Duration(float64(c.Total-c.Done) / rate * float64(time.Second))
		add("ETA %s", eta.Round(time.Second))
	}
	if !l.noFailed && (c.Failed > 0 || !l.failedIf) {
		add("failed %d", c.Failed)
	}
	if c.CostKnown && !l.noCost {
		switch {
		case l.bareCost || c.Projected <= 0 && l.shortCost:
			add("$%.4f", c.Cost)
		case l.shortCost:
			add("$%.4f (~$%.4f)", c.Cost, c.Projected)
		case c.Projected > 0:
			add("$%.4f so far · ~$%.4f projected", c.Cost, c.Projected)
		default:
			add("$%.4f so far", c.Cost)
		}
	}
	fields = append(fields, c.Parts[:max(l.parts, 0)]...)
	if c.HasUsage && !l.noTokens {
		if m := c.Usage.MediaTokens; m > 0 {
			add("tokens %s (media %s)", Count(c.Usage.Total()), Count(m))
		} else {
			add("tokens %s", Count(c.Usage.Total()))
		}
	}
	b.WriteString(strings.Join(fields, " · "))
	return b.String()
}

// rateString renders a rate with three significant figures at most:
// 0.42, 12.3, 1234.
func rateString(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

// Bar draws done of total as a bar width columns wide, brackets
// included: "[=====>----]".
func Bar(done, total int64, width int) string {
	inner := width - 2
	if inner <= 0 || total <= 0 {
		return ""
	}
	full := int(min(done, total) * int64(inner) / total)
	switch {
	case full >= inner:
		return "[" + strings.Repeat("=", inner) + "]"
	case full == 0:
		return "[" + strings.Repeat("-", inner) + "]"
	}
	return "[" + strings.Repeat("=", full-1) + ">" + strings.Repeat("-", inner-full) + "]"
}

// Count renders a number compactly: 950, 12.3k, 4.5M.
func Count(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
