package outfile

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/internal/progress"
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

// WriteStatus writes `batchagent status` for one job to w: its summary
// s as text (counts by status, failures by kind, calls, turns, tokens and
// the pace of the run).
func WriteStatus(stdout io.Writer, s checkpoint.Summary) {
	fmt.Fprintf(stdout, "job %s: ", s.JobID)
	if s.Inputs >= 0 {
		fmt.Fprintf(stdout, "%d inputs · pending %d · ", s.Inputs, s.Pending())
	}
	fmt.Fprintf(stdout, "done %d · failed %d · running %d\n",
		s.ByStatus[agent.StatusDone], s.ByStatus[agent.StatusFailed], s.ByStatus[agent.StatusRunning])
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(s.ByKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, s.ByKind[k]))
	}
	if len(kinds) > 0 {
		fmt.Fprintf(stdout, "  failed by kind: %s\n", strings.Join(kinds, ", "))
	}
	fmt.Fprintf(stdout, "  model calls %d · turns %d · tokens: prompt %s (cached %s) · completion %s\n",
		s.ModelCalls, s.Turns, progress.Count(s.Usage.PromptTokens), progress.Count(s.Usage.CachedTokens), progress.Count(s.Usage.CompletionTokens))
	if span := s.Last.Sub(s.First); span > 0 {
		fmt.Fprintf(stdout, "  %s to %s (%.1f agents/s)\n", s.First.Format(time.DateTime), s.Last.Format(time.DateTime),
			float64(s.ByStatus[agent.StatusDone]+s.ByStatus[agent.StatusFailed])/span.Seconds())
	}
}

// WriteAgentState writes `batchagent status --agent` to w: the saved
// state st of one agent as indented JSON, conversation included, with its
// timings and its turns' spans in seconds as result lines have them.
func WriteAgentState(w io.Writer, st agent.State) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(stateView{State: st, Timings: timingsOf(st.Timings), Spans: spansOf(st.Spans)})
}

// stateView is an agent's state as `status --agent` prints it: its
// timings and its turns' spans in seconds, as result lines have them
// (queue_s, ...), not in the nanoseconds of the state file.
type stateView struct {
	agent.State
	Timings timingsView `json:"timings"`         // hides State.Timings
	Spans   []spanView  `json:"spans,omitempty"` // hides State.Spans
}

// spanView is one turn's span in seconds.
type spanView struct {
	Turn      int       `json:"turn"`
	Start     time.Time `json:"start"`
	Queue     float64   `json:"queue_s"`
	Inference float64   `json:"inference_s"`
	TTFT      float64   `json:"ttft_s,omitempty"`
	Backoff   float64   `json:"backoff_s,omitempty"`
	Tools     float64   `json:"tools_s,omitempty"`
	Tier      int       `json:"tier,omitempty"`
}

func spansOf(spans []batchagent.Span) []spanView {
	var out []spanView
	for _, sp := range spans {
		out = append(out, spanView{Turn: sp.Turn, Start: sp.Start, Queue: secs(sp.Queue), Inference: secs(sp.Inference),
			TTFT: secs(sp.TTFT), Backoff: secs(sp.Backoff), Tools: secs(sp.Tools), Tier: sp.Tier})
	}
	return out
}

// timingsView are agent timings in seconds, keyed as in result lines.
type timingsView struct {
	Queue     float64 `json:"queue_s"`
	Inference float64 `json:"inference_s"`
	Tools     float64 `json:"tools_s"`
	Backoff   float64 `json:"backoff_s,omitempty"`
	TTFT      float64 `json:"ttft_s"`
	Total     float64 `json:"total_s,omitempty"`
}

func timingsOf(t agent.Timings) timingsView {
	return timingsView{Queue: secs(t.Queue), Inference: secs(t.Inference), Tools: secs(t.Tools),
		Backoff: secs(t.Backoff), TTFT: secs(t.TTFT), Total: secs(t.Total)}
}

// secs rounds d to microseconds, in seconds, as result lines do.
func secs(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }
