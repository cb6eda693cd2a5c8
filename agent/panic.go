package agent

import (
	"context"
	"encoding/json"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// The calls below run code the agent did not write: a model's Generate or
// Stream, a Check. A panic in one becomes a *job.PanicError, the error of
// that call, so that it fails this agent alone and the call's slot is
// released like any failed call's. It is not transient: the agent is not
// retried.

// generate calls m.Generate, turning a panic into a *job.PanicError.
func generate(ctx context.Context, m llm.Model, req *llm.Request) (resp *llm.Response, err error) {
	defer func() {
		if perr := job.Recovered("model", recover()); perr != nil {
			resp, err = nil, perr
		}
	}()
	return m.Generate(ctx, req)
}

// stream runs s's stream of req into yield; a panic of s, in Stream or in
// its sequence, is returned as a *job.PanicError.
func stream(ctx context.Context, s llm.Streamer, req *llm.Request, yield func(llm.Event, error) bool) (err error) {
	defer func() {
		if perr := job.Recovered("model stream", recover()); perr != nil {
			err = perr
		}
	}()
	s.Stream(ctx, req)(yield)
	return nil
}

// check calls fn on out, turning a panic into a *job.PanicError.
func check(fn func(json.RawMessage) error, out json.RawMessage) (err error) {
	defer func() {
		if perr := job.Recovered("check", recover()); perr != nil {
			err = perr
		}
	}()
	return fn(out)
}
