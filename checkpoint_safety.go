package batchagent

import "fmt"

// checkpointFailure is the result of an agent whose final state could not
// be saved, under [Config.StopOnCheckpointError]: r's counters (the work was
// done) without its outcome.
func (e *Engine) checkpointFailure(id string, r Result, err error) Result {
	r.Output, r.Raw = nil, ""
	r.Err = &AgentError{JobID: id, Agent: r.Index, Turn: -1, Op: "checkpoint", Kind: KindCanceled,
		Err: fmt.Errorf("%w: %w", ErrCheckpoint, err)}
	return r
}
