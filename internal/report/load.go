package report

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/tool"
)

// Load reads the run of jobID from store: the agents' final and running
// states and the samples a [Sampler] recorded there. A store without
// samples still gives a report: its throughput comes from the agents' end
// times, and its limit chart says it was not recorded. Load works on a
// store opened read-only. It returns an error wrapping
// [checkpoint.ErrUnknownJob] for a job the store does not know, and the
// store's errors.
func Load(ctx context.Context, store *checkpoint.Store, jobID string) (*Data, error) {
	sum, err := store.Summary(ctx, jobID)
	if err != nil {
		return nil, err
	}
	states, err := store.Load(ctx, jobID)
	if err != nil {
		return nil, err
	}
	recs, err := storedSamples(ctx, store, jobID)
	if err != nil {
		return nil, err
	}
	d := &Data{
		Info: Info{Job: jobID},
		Totals: Totals{Inputs: sum.Inputs, ByKind: make(map[string]int64), Usage: sum.Usage,
			ModelCalls: int64(sum.ModelCalls)},
		Done: true,
	}
	for _, st := range states {
		a := agentOfState(st)
		switch st.Status {
		case agent.StatusDone:
			d.Totals.Done++
			d.Totals.OK++
		case agent.StatusFailed:
			d.Totals.Done++
			d.Totals.Failed++
			d.Totals.ByKind[kindOf(&st)]++
		default:
			d.Totals.Running++
		}
		if !a.Started.IsZero() && (d.Start.IsZero() || a.Started.Before(d.Start)) {
			d.Start = a.Started
		}
		if e := a.end(); e.After(d.End) {
			d.End = e
		}
		d.Agents = append(d.Agents, a)
	}
	sortAgents(d.Agents)
	if err := d.addSamples(recs); err != nil {
		return nil, fmt.Errorf("report: job %s: %w", jobID, err)
	}
	d.Results = resultsOfStates(states, d.Info.Price)
	// Without turn times or samples (a state file of an older batchagent),
	// the run spans its record's first and last saves.
	if d.Start.IsZero() {
		d.Start = sum.First
	}
	if d.End.IsZero() {
		d.End = sum.Last
	}
	return d, nil
}

// storedSample is one sample as the store holds it.
type storedSample struct {
	At   time.Time
	Data json.RawMessage
}

// Run is one run of a job, as its samples recorded it: a resumed job
// has one per `batchagent run` that worked on it.
type Run struct {
	// Start and End are the run's first and last samples.
	Start, End time.Time
}

// addSamples decodes the stored samples into d: the run's Info from the
// first that has one, the tool counters each run ended with (summed), the runs (each
// run's first sample carries its Info), and the samples, timed from
// d.Start and thinned to DefaultMaxSamples. The samples cover the whole
// job: a later run's tokens, cost and throttled answers, which its engine
// counts from zero, are added to those of the runs before it, and its
// results so far (counted again as it restores them) never fall below
// those its earlier runs reached.
func (d *Data) addSamples(recs []storedSample) error {
	if len(recs) == 0 {
		return nil
	}
	if d.Start.IsZero() || recs[0].At.Before(d.Start) {
		d.Start = recs[0].At
	}
	var (
		info       *Info
		last, base Sample // the latest sample, whole-job; the earlier runs' sums
		// runTools are the tool counters of the latest run so far, and
		// baseTools those the runs before it ended with.
		runTools, baseTools []tool.Stats
	)
	for i, r := range recs {
		var p persisted
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return fmt.Errorf("sample %d of %d (at %s): %w", i+1, len(recs), r.At.Format(time.RFC3339), err)
		}
		if p.Info != nil || i == 0 {
			if info == nil {
				info = p.Info
			}
			if i > 0 {
				base = last
				baseTools = append(baseTools, runTools...)
				runTools = nil
			}
			d.Runs = append(d.Runs, Run{Start: r.At, End: r.At})
		}
		d.Runs[len(d.Runs)-1].End = r.At
		if p.Tools != nil {
			runTools = p.Tools
		}
		s := p.Sample
		s.Tokens += base.Tokens
		s.Cost += base.Cost
		s.Throttles += base.Throttles
		s.Done, s.OK, s.Failed = max(s.Done, base.Done), max(s.OK, base.OK), max(s.Failed, base.Failed)
		s.T = r.At.Sub(d.Start).Seconds()
		last = s
		d.Samples = append(d.Samples, s)
		if len(d.Samples) > 2*DefaultMaxSamples {
			d.Samples = thin(d.Samples)
		}
		if r.At.After(d.End) {
			d.End = r.At
		}
	}
	if len(runTools)+len(baseTools) > 0 {
		d.Tools = toolsByName(append(baseTools, runTools...))
	}
	if info != nil {
		d.Info = *info
		if d.Info.Job == "" {
			d.Info.Job = "(unnamed job)"
		}
	}
	return nil
}

// agentOfState returns the agent of a stored state.
func agentOfState(st agent.State) Agent {
	return Agent{Index: st.Index, Status: string(st.Status), Kind: kindOf(&st), Tier: st.Tier,
		Started: st.Started, Total: st.Timings.Total, TTFT: st.Timings.TTFT, Usage: st.Usage, Spans: spansOf(st.Spans)}
}

// kindOf returns the kind of st's failure; "" for none.
func kindOf(st *agent.State) string {
	if st.Failure == nil {
		return ""
	}
	return string(st.Failure.Kind)
}

// storedSamples returns the samples of jobID in store, oldest first.
func storedSamples(ctx context.Context, store *checkpoint.Store, jobID string) ([]storedSample, error) {
	sms, err := store.Samples(ctx, jobID)
	if err != nil {
		return nil, err
	}
	recs := make([]storedSample, len(sms))
	for i, sm := range sms {
		recs[i] = storedSample{At: sm.At, Data: sm.Data}
	}
	return recs, nil
}

// spansOf converts an agent's recorded turns.
func spansOf(js []job.Span) []Span {
	if len(js) == 0 {
		return nil
	}
	out := make([]Span, len(js))
	for i, s := range js {
		out[i] = Span{Turn: s.Turn, Start: s.Start, Queue: s.Queue, Inference: s.Inference, TTFT: s.TTFT,
			Backoff: s.Backoff, Tools: s.Tools, Tier: s.Tier}
	}
	return out
}
