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

// queueStatusJSON is `batchagent status --redis URL --json`: every run in
// the queue and every worker known to it.
type queueStatusJSON struct {
	Redis   string            `json:"redis"` // the URL, password redacted
	Runs    []queueRunJSON    `json:"runs"`
	Workers []queueWorkerJSON `json:"workers"`
}

// queueRunJSON is one run of queueStatusJSON. Total is null until the
// coordinator has enqueued every input.
type queueRunJSON struct {
	ID       string     `json:"id"`
	Job      string     `json:"job"`
	Created  time.Time  `json:"created"`
	Enqueued int        `json:"enqueued"`
	Done     int        `json:"done"`
	Total    *int       `json:"total"`
	Finished bool       `json:"finished"`
	Beat     *time.Time `json:"coordinator_beat,omitempty"`
	BeatAge  *float64   `json:"coordinator_beat_age_s,omitempty"`
}

// queueWorkerJSON is one worker of queueStatusJSON.
type queueWorkerJSON struct {
	ID      string    `json:"id"`
	Alive   bool      `json:"alive"`
	Held    int       `json:"held"`
	Beat    time.Time `json:"beat"`
	BeatAge float64   `json:"beat_age_s"`
}

// queueStatus prints the runs and workers of the queue at url: a table,
// or one JSON object with asJSON.
func queueStatus(ctx context.Context, url string, asJSON bool, stdout, stderr io.Writer) int {
	q, err := queue.Open(ctx, url, queue.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	defer q.Close()
	runs, err := q.Runs(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	workers, err := q.Workers(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent status:", err)
		return exitFailed
	}
	now := time.Now()
	v := queueStatusJSON{Redis: queue.RedactURL(url), Runs: []queueRunJSON{}, Workers: []queueWorkerJSON{}}
	for _, r := range runs {
		j := queueRunJSON{ID: r.ID, Job: r.JobPath, Created: r.Created, Enqueued: r.Enqueued, Done: r.Done, Finished: r.Finished}
		if r.Total >= 0 {
			j.Total = &r.Total
		}
		if !r.Coordinator.IsZero() {
			beat, age := r.Coordinator, now.Sub(r.Coordinator).Seconds()
			j.Beat, j.BeatAge = &beat, &age
		}
		v.Runs = append(v.Runs, j)
	}
	for _, w := range workers {
		v.Workers = append(v.Workers, queueWorkerJSON{ID: w.ID, Alive: w.Alive, Held: w.Held, Beat: w.Beat, BeatAge: now.Sub(w.Beat).Seconds()})
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
