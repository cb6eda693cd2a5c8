package batchagent

import (
	"errors"
	"fmt"
)

// ErrCheckpoint is wrapped by the error of a result whose final state could
// not be saved when [Config.StopOnCheckpointError] is set: the result is not
// delivered as the agent's outcome (a resumed run would not find it), and
// its kind is [KindCanceled], so a resume runs the input again.
var ErrCheckpoint = errors.New("batchagent: checkpoint save failed")

// checkpointFailure is the result of an agent whose final state could not
// be saved, under [Config.StopOnCheckpointError]: r's counters (the work was
// done) without its outcome.
func (e *Engine) checkpointFailure(id string, r Result, err error) Result {
	r.Output, r.Raw = nil, ""
	r.Err = &AgentError{JobID: id, Agent: r.Index, Turn: -1, Op: "checkpoint", Kind: KindCanceled,
		Err: fmt.Errorf("%w: %w", ErrCheckpoint, err)}
	return r
}
