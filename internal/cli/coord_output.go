package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/internal/progress"
	"github.com/batchagent/batchagent/queue"
)

// coordLogEvery is how often a coordinator off a terminal prints its
// progress line.
const coordLogEvery = 10 * time.Second

// coordCounters is what the progress line says of a coordinator's progress
// s over all workers (the queue q's): the results in the output (restored
// of them there before this run) of the inputs (estimated: those counted,
// until all are enqueued), the failed ones, the inputs enqueued, the
// workers alive and the agents they hold, the tokens and, when the price
// is known, the cost of the lines written this time.
func coordCounters(ctx context.Context, q *queue.Client, name string, s queue.CoordinatorStats, restored, estimated int, price estimate.Price) progress.Counters {
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
	c := progress.Counters{Label: "batchagent: " + name, Done: int64(s.Written), Failed: int64(s.Failed), Restored: int64(restored),
		Total: int64(total), Unit: "agents", Usage: s.Usage, HasUsage: true,
		Parts: []string{fmt.Sprintf("enqueued %d", s.Enqueued), fmt.Sprintf("workers %d alive, %d agents held", alive, held)}}
	if price.Known {
		c.Cost, c.CostKnown = price.Price.Cost(s.Usage), true // the lines written this time
	}
	return c
}

// writeCoordSummary prints the summary of the results a coordinator collected
// (s) in wall, as a table (progress.Table) fitted to w's width when w is a
// terminal; the output at outPath holds s.Written lines; cost is the cost
// row's value.
func writeCoordSummary(w io.Writer, name string, wall time.Duration, s queue.CoordinatorStats, outPath, cost string) {
	n := s.OK + s.Failed
	heading := fmt.Sprintf("batchagent: %s: %d results collected in %s (%.1f agents/s); %d in the output", name, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), s.Written)
	var t progress.Table
	agents := fmt.Sprintf("ok %d · failed %d", s.OK, s.Failed)
	if len(s.FailedByKind) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.FailedByKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.FailedByKind[k]))
		}
		agents += fmt.Sprintf(" (%s)", strings.Join(kinds, ", "))
	}
	t.Add("agents", "%s", agents)
	t.Add("model calls", "%d · turns %d", s.ModelCalls, s.Turns)
	t.Add("tool calls", "%d", s.ToolCalls)
	t.Add("tokens", "prompt %s · completion %s", progress.Count(s.Usage.PromptTokens), progress.Count(s.Usage.CompletionTokens))
	if cost != "" {
		t.Add("cost", "%s", cost)
	}
	t.Add("results", "%s", outPath)
	// A summary that cannot be written has nowhere else to go.
	_ = t.Write(w, heading, progress.Width(w))
}
