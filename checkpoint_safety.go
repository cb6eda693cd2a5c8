package batchagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrCheckpoint is wrapped by the error of a result whose final state could
// not be saved when [Job.StopOnCheckpointError] is set: the result is not
// delivered as the agent's outcome (a resumed run would not find it), and
// its kind is [KindCanceled], so a resume runs the input again.
var ErrCheckpoint = errors.New("batchagent: checkpoint save failed")

// sameInput reports whether saved, the input a saved state was made from,
// is the current input in: equal once both are JSON in one canonical form
// (keys sorted, numbers as their text). A saved state of another input
// (the inputs file was edited or reordered) must never stand in for this
// one's result. An input that cannot be encoded matches nothing.
func sameInput(saved, in Input) bool {
	if len(saved) == 0 && len(in) == 0 {
		return true
	}
	a, err := canonicalJSON(saved)
	if err != nil {
		return false
	}
	b, err := json.Marshal(in)
	if err != nil {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	// Values of Go types (structs, typed maps) marshal in their own field
	// order: decode and encode again, as a saved input was.
	if b, err = canonicalJSON(in); err != nil {
		return false
	}
	return bytes.Equal(a, b)
}

// canonicalJSON returns in as JSON with every object's keys sorted and
// numbers kept as their text.
func canonicalJSON(in Input) ([]byte, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// checkpointFailure is the result of an agent whose final state could not
// be saved, under [Job.StopOnCheckpointError]: r's counters (the work was
// done) without its outcome.
func (e *Engine) checkpointFailure(r Result, err error) Result {
	r.Output, r.Raw = nil, ""
	r.Err = &AgentError{JobID: e.job.ID, Agent: r.Index, Turn: -1, Op: "checkpoint", Kind: KindCanceled,
		Err: fmt.Errorf("%w: %w", ErrCheckpoint, err)}
	return r
}
