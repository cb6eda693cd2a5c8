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
	h := &Handle{done: make(chan struct{})}
	h.cancel = e.core.Submit(ctx, spec, in, h.end)
	return h
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
