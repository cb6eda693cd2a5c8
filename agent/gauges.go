package agent

import "sync/atomic"

// Gauges counts the agents of one or more Runners by what each is doing
// at the moment: waiting for admission to a model call, in a model call,
// or executing tool calls. An agent is in at most one of them; an agent
// doing anything else (rendering its task, waiting out a back-off before
// a retry, validating or repairing its answer, being checkpointed) is in
// none. Set it in [Config.Gauges]; an engine shares one among all its
// Runners and reads it for its live view.
//
// The zero value counts from zero. Its counters are atomics, safe for
// concurrent use; a snapshot of the three is not taken at one instant, so
// their sum may briefly differ from the agents running by one or two.
type Gauges struct {
	// Waiting counts the agents waiting for admission to a model call:
	// in [Gate.Acquire], for a slot and the rate limits and pauses the
	// gate applies before it. Without a Gate no agent waits.
	Waiting atomic.Int64
	// Calling counts the agents in a model call: from its admission until
	// its answer has ended or it failed, streamed tool calls that start
	// before the answer ends included.
	Calling atomic.Int64
	// Tools counts the agents executing the tool calls of a turn, from
	// the end of the model call that asked for them until the last one
	// ended.
	Tools atomic.Int64
}

// add adds d to c, a counter of g; nothing when g is nil.
func (g *Gauges) add(c func(*Gauges) *atomic.Int64, d int64) {
	if g != nil {
		c(g).Add(d)
	}
}

// The counters of Gauges, for add.
func waiting(g *Gauges) *atomic.Int64 { return &g.Waiting }
func calling(g *Gauges) *atomic.Int64 { return &g.Calling }
func inTools(g *Gauges) *atomic.Int64 { return &g.Tools }
