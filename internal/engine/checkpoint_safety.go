package engine

import (
	"fmt"

	"github.com/batchagent/batchagent/job"
)

// checkpointFailure is the result of an agent whose final state could not
// be saved, under [Config.StopOnCheckpointError]: r's counters (the work was
// done) without its outcome.
func (e *Engine) checkpointFailure(id string, r job.Result, err error) job.Result {
	r.Output, r.Raw = nil, ""
	r.Err = &job.AgentError{JobID: id, Agent: r.Index, Turn: -1, Op: "checkpoint", Kind: job.KindCanceled,
		Err: fmt.Errorf("%w: %w", job.ErrCheckpoint, err)}
	return r
}
