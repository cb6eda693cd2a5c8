package job

import "time"

// Span is one model turn of an agent as it ran: when it became ready for
// its model call and where its time went until the next turn. A turn whose
// model call failed has a span too, with the time it spent. Queue,
// Inference, Backoff and Tools of an agent's spans add up to its
// [Timings] of the same names, but for the turns of fallback tiers
// (Tier > 0), which Timings leave out, and turns past [MaxSpans].
type Span struct {
	// Turn is the 0-based turn number; corrections of invalid answers
	// count as turns.
	Turn int `json:"turn"`
	// Start is when the agent became ready for the turn's model call:
	// its wait for an inference slot begins.
	Start time.Time `json:"start"`
	// Queue is the time spent waiting for an inference slot.
	Queue time.Duration `json:"queue"`
	// Inference is the time spent in the turn's model calls with the slot
	// held, retries included.
	Inference time.Duration `json:"inference"`
	// TTFT is the time from the sending of the model call that counted
	// (after its wait for a slot and any back-off before it) to the first
	// token of its answer; zero when none came.
	TTFT time.Duration `json:"ttft,omitempty"`
	// Backoff is the time spent waiting before retried calls of the turn.
	Backoff time.Duration `json:"backoff,omitempty"`
	// Tools is the time spent on the turn's tool calls, from the first
	// one's start to the last one's end. Tools that start while the answer
	// still streams make it overlap Inference.
	Tools time.Duration `json:"tools,omitempty"`
	// Tier is the fallback tier that ran the turn: 0 the job's model, 1
	// and on its Fallbacks in order.
	Tier int `json:"tier,omitempty"`
}

// End returns Start plus the turn's queue, inference, backoff and tool
// time: when the turn ended, or later by the overlap of tools started
// while the answer streamed.
func (s Span) End() time.Time {
	return s.Start.Add(s.Queue + s.Inference + s.Backoff + s.Tools)
}

// MaxSpans is the most spans an agent keeps; later turns are not recorded
// (Turn numbers stay true).
const MaxSpans = 256
