package batchagent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent/schema"
)

// TypedResult is a [Result] whose output is decoded into a T.
type TypedResult[T any] struct {
	Result
	// Value is the decoded output; the zero T when the agent failed.
	Value T
}

// RunTyped is [Run] for outputs of Go type T: when d has no output schema,
// it is derived from T (see [schema.For]); d is compiled with [NewSpec],
// run on a new engine with the default [Config], and each successful
// output is decoded into Value. The error is non-nil only for a bad job or
// a T no schema can describe.
func RunTyped[T any](ctx context.Context, d Def, inputs Inputs) ([]TypedResult[T], error) {
	if len(d.OutputSchema) == 0 {
		s, err := schema.For[T]()
		if err != nil {
			return nil, fmt.Errorf("%w: output type: %v", ErrBadJob, err)
		}
		d.OutputSchema = s
	}
	spec, err := NewSpec(d)
	if err != nil {
		return nil, err
	}
	results, err := Run(ctx, spec, inputs)
	if err != nil {
		return nil, err
	}
	j := spec.Def()
	typed := make([]TypedResult[T], len(results))
	for i, r := range results {
		typed[i].Result = r
		if r.Err != nil {
			continue
		}
		if err := json.Unmarshal(r.Output, &typed[i].Value); err != nil {
			// The output passed the schema but does not fit T: the schema
			// given was looser than T.
			typed[i].Err = &AgentError{JobID: j.ID, Agent: r.Index, Turn: r.Turns - 1, Op: "validate", Kind: KindValidation,
				Err: fmt.Errorf("output does not decode into %T: %w", typed[i].Value, err)}
		}
	}
	return typed, nil
}
