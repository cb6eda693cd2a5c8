package outfile

import (
	"encoding/json"
	"io"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
)

// statusJSON is `batchagent status --json`: the totals over the state
// file's jobs, and each job's summary. Inputs and Pending are null when
// a job's number of inputs is not known.
type statusJSON struct {
	State   string      `json:"state"`
	Inputs  *int        `json:"inputs"`
	Pending *int        `json:"pending"`
	Done    int         `json:"done"`
	Failed  int         `json:"failed"`
	Running int         `json:"running"`
	Jobs    []jobStatus `json:"jobs"`
}

// jobStatus is one job's summary in statusJSON.
type jobStatus struct {
	Job          string         `json:"job"`
	Inputs       *int           `json:"inputs"`
	Pending      *int           `json:"pending"`
	Done         int            `json:"done"`
	Failed       int            `json:"failed"`
	Running      int            `json:"running"`
	FailedByKind map[string]int `json:"failed_by_kind"`
	ModelCalls   int            `json:"model_calls"`
	Turns        int            `json:"turns"`
	Usage        llm.Usage      `json:"usage"`
	First        *time.Time     `json:"first,omitempty"`
	Last         *time.Time     `json:"last,omitempty"`
	AgentsPerS   *float64       `json:"agents_per_s,omitempty"`
}

// WriteStatusJSON writes `batchagent status --json` to w: the summaries
// sums of the jobs of the state file at path, and their totals, as one
// JSON object on one line. Inputs and pending are null where a job's
// number of inputs is not known. It returns the error met writing.
func WriteStatusJSON(w io.Writer, path string, sums []checkpoint.Summary) error {
	v := statusJSON{State: path, Jobs: []jobStatus{}}
	inputs, pending, known := 0, 0, len(sums) > 0
	for _, s := range sums {
		j := jobStatus{
			Job: s.JobID, Done: s.ByStatus[agent.StatusDone], Failed: s.ByStatus[agent.StatusFailed],
			Running: s.ByStatus[agent.StatusRunning], FailedByKind: s.ByKind, ModelCalls: s.ModelCalls,
			Turns: s.Turns, Usage: s.Usage,
		}
		if j.FailedByKind == nil {
			j.FailedByKind = map[string]int{}
		}
		if s.Inputs >= 0 {
			in, p := s.Inputs, s.Pending()
			j.Inputs, j.Pending = &in, &p
			inputs += in
			pending += p
		} else {
			known = false
		}
		if !s.First.IsZero() {
			first := s.First.UTC()
			j.First = &first
		}
		if !s.Last.IsZero() { // zero: a run begun that saved no state yet
			last := s.Last.UTC()
			j.Last = &last
		}
		if !s.First.IsZero() && !s.Last.IsZero() {
			if span := s.Last.Sub(s.First); span > 0 {
				rate := float64(j.Done+j.Failed) / span.Seconds()
				j.AgentsPerS = &rate
			}
		}
		v.Done += j.Done
		v.Failed += j.Failed
		v.Running += j.Running
		v.Jobs = append(v.Jobs, j)
	}
	if known {
		v.Inputs, v.Pending = &inputs, &pending
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
