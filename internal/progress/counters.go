package progress

import (
	"fmt"
	"strings"
	"time"

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
	// Parts are the run's own counts, drawn after the failed ones in
	// order: "agents 3", "calls 2/16".
	Parts []string
	// Usage is the tokens spent so far, drawn when HasUsage is set.
	Usage llm.Usage
	// HasUsage says that Usage is counted (a batch poller does not know
	// it).
	HasUsage bool
	// Cost, when set, ends the line: "$0.0123 so far".
	Cost string
}

// Line renders c as the display draws it, elapsed being how long the run
// has gone on: done and failed, the run's own parts, the rate, the ETA,
// the tokens and the cost. The most useful come first, since a narrow
// terminal truncates the end.
func (c Counters) Line(elapsed time.Duration) string {
	var rate float64
	if elapsed > 0 {
		rate = float64(c.Done-c.Restored) / elapsed.Seconds()
	}
	var b strings.Builder
	if c.Label != "" {
		fmt.Fprintf(&b, "%s: ", c.Label)
	}
	switch {
	case c.Total > 0 && c.Estimated:
		fmt.Fprintf(&b, "done %d/~%d", c.Done, c.Total)
	case c.Total > 0:
		fmt.Fprintf(&b, "done %d/%d", c.Done, c.Total)
	default:
		fmt.Fprintf(&b, "done %d", c.Done)
	}
	fmt.Fprintf(&b, " · failed %d", c.Failed)
	for _, p := range c.Parts {
		fmt.Fprintf(&b, " · %s", p)
	}
	unit := c.Unit
	if unit == "" {
		unit = "items"
	}
	fmt.Fprintf(&b, " · %.1f %s/s", rate, unit)
	if c.Total > 0 && rate > 0 && c.Done < c.Total {
		eta := time.Duration(float64(c.Total-c.Done) / rate * float64(time.Second))
		fmt.Fprintf(&b, " · ETA %s", eta.Round(time.Second))
	}
	if c.HasUsage {
		fmt.Fprintf(&b, " · tokens %s", Count(c.Usage.Total()))
	}
	if c.Cost != "" {
		fmt.Fprintf(&b, " · %s", c.Cost)
	}
	return b.String()
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
