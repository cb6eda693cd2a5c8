package batchagent

import (
	"context"

	"github.com/batchagent/batchagent/agent"
)

// Checkpointer persists agents' progress so that a stopped run can resume:
// every completed turn and every final result is saved, durably, before the
// agent goes on or its result is delivered. *checkpoint.Store satisfies it;
// checkpoint/checkpointtest.Run checks an implementation against this
// contract.
//
// A Checkpointer is safe for concurrent use: the engine saves from every
// agent's goroutine at once, while other runs may Load. States are keyed
// by job ID and input index; job IDs keep runs apart (IDs differing in
// case or by a prefix are different jobs).
type Checkpointer interface {
	// Save records one agent's latest state, replacing any state saved
	// before for the same JobID and Index, whatever the statuses (a failed
	// input run again saves a running state over its failed one). When
	// Save returns nil the state is durable and every later Load sees it.
	// Save must not keep s, nor the slices and maps it refers to, after it
	// returns: the caller may change them. When ctx ends first, Save may
	// return an error wrapping ctx.Err(); the state may then be saved or
	// not.
	Save(ctx context.Context, s agent.State) error
	// Load returns the latest saved state of every agent of a job, at most
	// one per index, in any order; none, and nil, for a job never saved.
	// Every field comes back as saved: counters, usage, timings (Total
	// included), token cap, output, raw answer, the failure (Failure:
	// kind, step, turn, cause chain, problems), Started and Spans (times
	// as the same instants, in any zone). JSON values (Output,
	// tool-call arguments) may come back re-encoded as the same JSON, and
	// nil and empty slices and maps alike. The engine reads only the
	// input, results and counters of final states (done, failed), so those
	// may come without their Messages, as *checkpoint.Store returns them;
	// a running state's Messages must come back whole, as the agent
	// resumes from them.
	// A state is used only for the input it holds: one whose Input differs
	// from the current input at its Index (the inputs were edited or
	// reordered) is ignored, and that input runs afresh; so Input must come
	// back as saved, numbers included (decode with UseNumber): a
	// json.Number as the same json.Number (integers above 2^53 and 1e999
	// kept), other values as the same JSON.
	Load(ctx context.Context, jobID string) ([]agent.State, error)
}
