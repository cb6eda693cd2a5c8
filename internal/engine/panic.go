package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// The calls below run code the engine did not write (a fallback Func, a
// Check, a custom llm.Model, OnResult): a panic in one becomes a
// *job.PanicError that fails the one agent it concerns, and the engine
// goes on. Package agent does the same for the calls of its loop.

// callFunc calls a fallback function, turning a panic into a
// *job.PanicError of site.
func callFunc(ctx context.Context, site string, fn func(context.Context, job.Input) (json.RawMessage, error), in job.Input) (out json.RawMessage, err error) {
	defer func() {
		if perr := job.Recovered(site, recover()); perr != nil {
			out, err = nil, perr
		}
	}()
	return fn(ctx, in)
}

// callCheck calls a job's Check on out, turning a panic into a
// *job.PanicError.
func callCheck(fn func(json.RawMessage) error, out json.RawMessage) (err error) {
	defer func() {
		if perr := job.Recovered("check", recover()); perr != nil {
			err = perr
		}
	}()
	return fn(out)
}

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

// onResult calls fn with r; a panic of fn is logged at Error and returned
// as a *job.PanicError.
func (e *Engine) onResult(id string, fn func(job.Result), r job.Result) (err error) {
	defer func() {
		if perr := job.Recovered("on_result", recover()); perr != nil {
			err = perr
			e.logPanic(context.Background(), id, r.Index, perr)
		}
	}()
	fn(r)
	return nil
}

// logPanic logs, at Error, the panic err holds (a *job.PanicError) with
// its stack; it does nothing for an error without one.
func (e *Engine) logPanic(ctx context.Context, id string, agent int, err error) {
	pe, ok := errors.AsType[*job.PanicError](err)
	if !ok {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelError, "user code panicked: the agent fails, the engine goes on",
		slog.String("job", id), slog.Int("agent", agent), slog.String("site", pe.Site),
		slog.Any("err", err), slog.String("stack", string(pe.Stack)))
}
