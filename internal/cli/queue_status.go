package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/batchagent/batchagent/queue"
)

// queueStatus prints the runs and workers of the queue at url: a table,
// or one JSON object with asJSON.
func queueStatus(ctx context.Context, url string, asJSON bool, stdout, stderr io.Writer) int {
	q, err := queue.Open(ctx, url, queue.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	defer q.Close()
	v, err := q.Status(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			fmt.Fprintln(stderr, "batchagent status:", err)
			return exitFailed
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RUN\tJOB\tDONE\tENQUEUED\tTOTAL\tCOORDINATOR\tSTATE\n")
	for _, r := range v.Runs {
		total, beat, state := "?", "never", "running"
		if r.Total != nil {
			total = fmt.Sprint(*r.Total)
		}
		if r.BeatAge != nil {
			beat = fmt.Sprintf("%s ago", (time.Duration(*r.BeatAge * float64(time.Second))).Round(time.Second))
		}
		if r.Finished {
			state = "finished"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ID, r.Job, r.Done, r.Enqueued, total, beat, state)
	}
	if len(v.Runs) == 0 {
		fmt.Fprintf(tw, "(no runs)\n")
	}
	fmt.Fprintf(tw, "\nWORKER\tALIVE\tHELD\tLAST BEAT\n")
	for _, w := range v.Workers {
		alive := "no"
		if w.Alive {
			alive = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s ago\n", w.ID, alive, w.Held, (time.Duration(w.BeatAge * float64(time.Second))).Round(time.Second))
	}
	if len(v.Workers) == 0 {
		fmt.Fprintf(tw, "(no workers)\n")
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	return exitOK
}
