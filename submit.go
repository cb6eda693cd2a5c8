package batchagent

import (
	"context"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
)

// Handle is one agent started by [Engine.Submit]. Its methods are safe for
// concurrent use.
type Handle struct {
	done   chan struct{} // closed once res is set
	res    Result
	cancel context.CancelFunc
}

// Submit starts one agent of spec on in and returns at once, without
// waiting for model work: the agent waits for its backend's admission in
// spec's priority class, so [Interactive] specs overtake batch work for
// the next free slot. It is not limited by [Config.MaxActive]: each
// Handle holds its agent. The agent ends when it finishes, when ctx or
// [Handle.Cancel] cancels it, or when the engine shuts down; its result
// (of kind [KindCanceled] for the last three) is then on the Handle. A
// nil spec gives a Handle that is already done, with an error wrapping
// [ErrBadJob]; so does an engine already shut down, with [ErrShutdown].
// Submit's agents are not checkpointed, and their results are not passed
// to [Config.OnResult]; Result.Index is the submission's number on the
// engine, from 0.
func (e *Engine) Submit(ctx context.Context, spec *Spec, in Input) *Handle {
	return e.SubmitMedia(ctx, spec, in, nil)
}

// SubmitMedia is [Engine.Submit] with media: the agent's first message
// holds its task's text, then media (images, audio, documents as
// [llm.Part] values), as its parts, for a model whose
// [llm.Capabilities].Media accepts them. An agent with media is never
// packed with others. The gateway's agent mode passes a request's media
// to the agent this way.
func (e *Engine) SubmitMedia(ctx context.Context, spec *Spec, in Input, media []llm.Part) *Handle {
	h := &Handle{done: make(chan struct{})}
	h.cancel = e.core.SubmitMedia(ctx, spec, in, media, h.end)
	return h
}

func (h *Handle) end(r Result) {
	h.res = r
	close(h.done)
}

// Done returns a channel closed when the agent's result is ready.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Try returns the agent's result and true when it is ready, or false at
// once when it is not.
func (h *Handle) Try() (Result, bool) {
	select {
	case <-h.done:
		return h.res, true
	default:
		return Result{}, false
	}
}

// Wait waits for the agent's result. It returns ctx's error if ctx ends
// first; the agent goes on (see [Handle.Cancel]).
func (h *Handle) Wait(ctx context.Context) (Result, error) {
	select {
	case <-h.done:
		return h.res, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Cancel stops the agent: a model call in flight is abandoned and its
// slot freed. The result, of kind [KindCanceled] unless the agent
// finished first, is on the Handle once the agent has stopped. Cancel may
// be called more than once and after the agent ended.
func (h *Handle) Cancel() {
	if h.cancel != nil {
		h.cancel()
	}
}

// A StateLoader is a [Checkpointer] that loads one agent's saved state.
// [Engine.Agent] uses it, when the engine's Checkpointer is one, to
// continue an agent another process began without loading the whole
// job's states; otherwise it picks the agent's state from Load.
type StateLoader interface {
	// LoadState returns the latest saved state of agent index of jobID,
	// as Load would; ok is false when none is saved.
	LoadState(ctx context.Context, jobID string, index int) (st agent.State, ok bool, err error)
}

// Agent runs the agent of input in at position index of spec's job, the
// way a run does for each of its inputs: from its last completed turn
// when the engine's Checkpointer holds one (a finished agent's result
// comes back as saved, without model calls), checkpointed after every
// turn, and its Handle gets the result once it is durable. It returns at
// once. It is how a queue worker runs the inputs of a run spread over
// many processes: each input at its own index, under the run's job ID.
func (e *Engine) Agent(ctx context.Context, spec *Spec, index int, in Input) *Handle {
	h := &Handle{done: make(chan struct{})}
	h.cancel = e.core.Agent(ctx, spec, index, in, h.end)
	return h
}

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
