package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/queue"
)

// coordLine says how far the run is, over all workers (the queue q's):
// s is the coordinator's progress; estimated the inputs counted, for the
// total until all are enqueued; the usage of the lines written this time
// is priced when the price is known.
func coordLine(ctx context.Context, q *queue.Client, name string, s queue.CoordinatorStats, estimated int, price estimate.Price) string {
	total := s.Total
	if total < 0 {
		total = estimated
	}
	alive, held := 0, 0
	if ws, err := q.Workers(ctx); err == nil {
		for _, w := range ws {
			if w.Alive {
				alive++
				held += w.Held
			}
		}
	}
	line := fmt.Sprintf("batchagent: %s: done %d/%d · enqueued %d · workers %d alive, %d agents held", name, s.Written, total, s.Enqueued, alive, held)
	if price.Known {
		line += fmt.Sprintf(" · $%.4f", price.Price.Cost(s.Usage)) // the lines written this time
	}
	return line
}

// coordProgress draws the progress line: redrawn in place on a terminal,
// else a line every 10 seconds.
type coordProgress struct {
	w     io.Writer
	tty   bool
	drawn bool
	last  time.Time
}

func newCoordProgress(w io.Writer, quiet bool) *coordProgress {
	p := &coordProgress{w: w}
	if f, ok := baseWriter(w).(*os.File); ok && !quiet {
		p.tty = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *coordProgress) draw(line string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.drawn = true
		return
	}
	if time.Since(p.last) >= 10*time.Second {
		p.last = time.Now()
		fmt.Fprintln(p.w, line)
	}
}

func (p *coordProgress) stop() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// writeCoordSummary prints the summary of the results a coordinator collected
// (s) in wall; the output at outPath holds s.Written lines.
func writeCoordSummary(w io.Writer, name string, wall time.Duration, s queue.CoordinatorStats, outPath string) {
	n := s.OK + s.Failed
	fmt.Fprintf(w, "batchagent: %s: %d results collected in %s (%.1f agents/s); %d in the output\n", name, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), s.Written)
	fmt.Fprintf(w, "  ok %d · failed %d", s.OK, s.Failed)
	if len(s.FailedByKind) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.FailedByKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.FailedByKind[k]))
		}
		fmt.Fprintf(w, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  model calls %d · turns %d · tool calls %d · tokens: prompt %s · completion %s\n", s.ModelCalls, s.Turns, s.ToolCalls, count(s.Usage.PromptTokens), count(s.Usage.CompletionTokens))
	fmt.Fprintf(w, "  results: %s\n", outPath)
}
