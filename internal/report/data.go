package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// Data is the picture of one run that [Write] draws. Its zero value is an
// empty run: every chart says it has nothing to show.
type Data struct {
	// Info names the job, its model and its price.
	Info Info
	// Start and End bound the run: its first and last recorded moment.
	Start, End time.Time
	// Totals are the run's counters.
	Totals Totals
	// Agents are the agents with a state, by index.
	Agents []Agent
	// Results is the results table; nil: the page has none.
	Results *Results
	// Runs are the runs of the job the data covers, oldest first, when
	// the samples recorded them; empty when unknown.
	Runs []Run
	// Samples are the run's counters over time, oldest first; empty when
	// none were recorded.
	Samples []Sample
	// Tools are the per-tool counters, by tool name; empty when unknown.
	Tools []tool.Stats
	// Done reports that the run has ended (a live page stops updating).
	Done bool
}

// Info names a run's job, model and price.
type Info struct {
	// Job is the job's name.
	Job string `json:"job"`
	// Model is the job's model.
	Model string `json:"model,omitempty"`
	// Price is what the model's tokens cost; nil when unknown.
	Price *llm.Price `json:"price,omitempty"`
	// PriceSource says where Price comes from ("file", "table dated
	// 2026-01-15").
	PriceSource string `json:"price_source,omitempty"`
}

// Totals are a run's counters.
type Totals struct {
	// Inputs is the number of inputs, or -1 when unknown.
	Inputs int
	// Done counts the finished agents; OK and Failed split them.
	Done, OK, Failed int64
	// Running counts the agents with a state that have not finished.
	Running int64
	// AgentsCalling, AgentsInTools and AgentsWaitingForSlot split the
	// agents running by what they do now: in a model call, executing tool
	// calls, waiting for a slot (admission to a model call). The rest of
	// Running ([Totals.AgentsOther]) are between them. All three are zero
	// when the run has ended, or for a run read from its state file.
	AgentsCalling, AgentsInTools, AgentsWaitingForSlot int64
	// ToolErrors counts the tool calls that returned an error so far.
	ToolErrors int64
	// ByKind counts the failures by error kind.
	ByKind map[string]int64
	// ModelCalls counts model calls, retries included.
	ModelCalls int64
	// Usage sums the tokens of the model calls.
	Usage llm.Usage
}

// Agent is one agent of a run.
type Agent struct {
	// Index is the agent's position in the inputs.
	Index int
	// Status is "done", "failed" or "running".
	Status string
	// Kind is a failed agent's error kind; "" otherwise.
	Kind string
	// Tier is the fallback tier that answered (0: the job's model).
	Tier int
	// Started is when the agent started; zero when unknown.
	Started time.Time
	// Total is the agent's wall time; zero while it runs or when unknown.
	Total time.Duration
	// TTFT is the agent's time to its first token, from the sending of its
	// first answered model call; zero when unknown.
	TTFT time.Duration
	// Queue is the agent's time waiting for a slot (admission to its
	// model calls), all turns together; zero when unknown or none.
	Queue time.Duration
	// Spans are the agent's turns, oldest first; empty when not recorded.
	Spans []Span
	// Usage sums the tokens of the agent's model calls.
	Usage llm.Usage
}

// Span is one turn of an agent: when it began, and where its time went in
// order: queue wait, backoff, inference, tool wait.
type Span struct {
	// Turn is the turn's 0-based number.
	Turn int
	// Start is when the turn began waiting for a slot.
	Start time.Time
	// Queue, Inference, TTFT, Backoff and Tools are the turn's slot wait,
	// model call time, time to first token (from the request's sending:
	// the slot wait is not in it), wait before retries and tool wait.
	Queue, Inference, TTFT, Backoff, Tools time.Duration
	// Tier is the tier that answered the turn.
	Tier int
}

// Sample is a run's counters at one moment.
type Sample struct {
	// T is the seconds since the run's start.
	T float64 `json:"t"`
	// Done, OK and Failed count the results so far.
	Done   int64 `json:"done"`
	OK     int64 `json:"ok"`
	Failed int64 `json:"failed"`
	// Active counts the agents started and not finished.
	Active int64 `json:"active"`
	// AgentsCalling, AgentsInTools and AgentsWaitingForSlot split Active
	// by what the agents do: in a model call, executing tool calls,
	// waiting for a slot (admission to a model call); the rest
	// ([Sample.AgentsOther]) are between them. Zero in samples recorded
	// before they were.
	AgentsCalling        int64 `json:"agents_calling,omitempty"`
	AgentsInTools        int64 `json:"agents_in_tools,omitempty"`
	AgentsWaitingForSlot int64 `json:"agents_waiting_for_slot,omitempty"`
	// Inflight counts the model calls holding a slot (a packed call,
	// which answers several agents, counts once).
	Inflight int `json:"inflight"`
	// Limit is the adaptive limit on model calls in flight; 0: none.
	Limit int `json:"limit"`
	// Throttles counts the throttled answers (429s, overload) so far.
	Throttles int64 `json:"throttles"`
	// Tokens counts the tokens so far.
	Tokens int64 `json:"tokens"`
	// ToolErrors counts the tool calls that returned an error so far.
	ToolErrors int64 `json:"tool_errors,omitempty"`
	// Cost is the cost so far; 0 when the price is unknown.
	Cost float64 `json:"cost,omitempty"`
}

// AgentsOther returns the agents running that are neither in a model
// call, nor executing tool calls, nor waiting for a slot: rendering their
// task, waiting out a back-off before a retry, validating their answer,
// being checkpointed or delivered. The gauges are read one by one, so it
// is never below zero but may be off by an agent or two.
func (t Totals) AgentsOther() int64 {
	return max(t.Running-t.AgentsCalling-t.AgentsInTools-t.AgentsWaitingForSlot, 0)
}

// Cost returns the run's cost and whether it is known: the price applied
// to the run's tokens.
func (d *Data) Cost() (float64, bool) {
	if d.Info.Price == nil {
		return 0, false
	}
	return d.Info.Price.Cost(d.Totals.Usage), true
}

// Duration returns the run's length, End minus Start; zero when either is
// unknown.
func (d *Data) Duration() time.Duration {
	if d.Start.IsZero() || d.End.Before(d.Start) {
		return 0
	}
	return d.End.Sub(d.Start)
}

// AgentsOther returns the agents of Active that are neither in a model
// call, nor executing tool calls, nor waiting for a slot; never below
// zero.
func (s Sample) AgentsOther() int64 {
	return max(s.Active-s.AgentsCalling-s.AgentsInTools-s.AgentsWaitingForSlot, 0)
}

// ToolErrors returns the tool calls that returned an error: the sum of
// the per-tool counters, else, when none were recorded, the last sample's.
func (d *Data) ToolErrors() int64 {
	if len(d.Tools) > 0 {
		var n int64
		for _, t := range d.Tools {
			n += t.Errors
		}
		return n
	}
	if len(d.Samples) > 0 {
		return d.Samples[len(d.Samples)-1].ToolErrors
	}
	return d.Totals.ToolErrors
}

// end returns when a finished agent ended; zero when unknown or running.
func (a Agent) end() time.Time {
	if a.Started.IsZero() || a.Total <= 0 {
		return time.Time{}
	}
	return a.Started.Add(a.Total)
}

// sortAgents orders agents by index.
func sortAgents(agents []Agent) {
	slices.SortFunc(agents, func(a, b Agent) int { return cmp.Compare(a.Index, b.Index) })
}

// timeline returns the samples to draw: those recorded, else, when none
// were, samples derived from the agents' start and end times (Limit,
// Inflight and Throttles zero). recorded says which.
func (d *Data) timeline() (samples []Sample, recorded bool) {
	if len(d.Samples) > 0 {
		return d.Samples, true
	}
	dur := d.Duration()
	if dur <= 0 || len(d.Agents) == 0 {
		return nil, false
	}
	type edge struct {
		t          float64
		start, end int64
		ok         bool
		tokens     int64
		cost       float64
	}
	var edges []edge
	for _, a := range d.Agents {
		if a.Started.IsZero() {
			continue
		}
		edges = append(edges, edge{t: a.Started.Sub(d.Start).Seconds(), start: 1})
		if e := a.end(); !e.IsZero() {
			ed := edge{t: e.Sub(d.Start).Seconds(), end: 1, ok: a.Status == "done", tokens: a.Usage.Total()}
			if d.Info.Price != nil {
				ed.cost = d.Info.Price.Cost(a.Usage)
			}
			edges = append(edges, ed)
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.t, b.t) })
	const points = 200
	step := dur.Seconds() / points
	var s Sample
	i := 0
	samples = make([]Sample, 0, points+1)
	for p := 0; p <= points; p++ {
		t := float64(p) * step
		for ; i < len(edges) && edges[i].t <= t; i++ {
			s.Active += edges[i].start - edges[i].end
			s.Done += edges[i].end
			s.Tokens += edges[i].tokens
			s.Cost += edges[i].cost
			if edges[i].end > 0 {
				if edges[i].ok {
					s.OK++
				} else {
					s.Failed++
				}
			}
		}
		s.T = t
		samples = append(samples, s)
	}
	return samples, false
}
