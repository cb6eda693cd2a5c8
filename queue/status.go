package queue

import (
	"context"
	"time"
)

// Status is a snapshot of a queue: every run in it and every worker known
// to it, in the shape `batchagent status --redis URL --json` prints.
type Status struct {
	// Redis is the queue's URL, its password redacted ([RedactURL]).
	Redis   string         `json:"redis"`
	Runs    []StatusRun    `json:"runs"`
	Workers []StatusWorker `json:"workers"`
}

// StatusRun is one run of a [Status]. Total is nil until the coordinator
// has enqueued every input; Beat and BeatAge are nil when the coordinator
// never heartbeat.
type StatusRun struct {
	ID       string     `json:"id"`
	Job      string     `json:"job"` // the job file's path
	Created  time.Time  `json:"created"`
	Enqueued int        `json:"enqueued"`
	Done     int        `json:"done"`
	Total    *int       `json:"total"`
	Finished bool       `json:"finished"`
	Beat     *time.Time `json:"coordinator_beat,omitempty"`
	BeatAge  *float64   `json:"coordinator_beat_age_s,omitempty"` // seconds, when the snapshot was taken
}

// StatusWorker is one worker of a [Status].
type StatusWorker struct {
	ID      string    `json:"id"`
	Alive   bool      `json:"alive"`
	Held    int       `json:"held"`
	Beat    time.Time `json:"beat"`
	BeatAge float64   `json:"beat_age_s"` // seconds, when the snapshot was taken
}

// Status returns a snapshot of the queue's runs ([Client.Runs]) and
// workers ([Client.Workers]), with the ages of their heartbeats now.
func (c *Client) Status(ctx context.Context) (Status, error) {
	runs, err := c.Runs(ctx)
	if err != nil {
		return Status{}, err
	}
	workers, err := c.Workers(ctx)
	if err != nil {
		return Status{}, err
	}
	now := time.Now()
	v := Status{Redis: c.url, Runs: []StatusRun{}, Workers: []StatusWorker{}}
	for _, r := range runs {
		j := StatusRun{ID: r.ID, Job: r.JobPath, Created: r.Created, Enqueued: r.Enqueued, Done: r.Done, Finished: r.Finished}
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
		v.Workers = append(v.Workers, StatusWorker{ID: w.ID, Alive: w.Alive, Held: w.Held, Beat: w.Beat, BeatAge: now.Sub(w.Beat).Seconds()})
	}
	return v, nil
}
