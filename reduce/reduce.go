// Package reduce combines the outputs of a batch job into one, with a reduce
// prompt applied hierarchically when the outputs do not fit one call: group
// the outputs, reduce each group, reduce the group results, until one output
// remains. Each level is an ordinary [batchagent.Engine.Run] of its own
// [batchagent.Spec], built once per level from the map job's, so it shares
// the map job's model, limits and the engine's admission and checkpoint,
// and a checkpointed reduce resumes like any run.
package reduce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchagent/batchagent"
)

// Defaults of [Config].
const (
	DefaultGroupSize = 20
	DefaultMaxBytes  = 64 << 10
)

// Config describes a reduce step over a job's outputs: a prompt that
// combines several outputs into one, applied hierarchically when the
// outputs do not fit one call (group the outputs, reduce each group, reduce
// the group results, until one output remains). Only Task is required.
type Config struct {
	// Task is the reduce prompt, a template whose {outputs} placeholder is
	// a JSON array of the outputs to combine; {level} (from 1) and {group}
	// (from 0) are also set. Required.
	Task string
	// System is the reduce agents' system prompt. Defaults to the map
	// job's.
	System string
	// OutputSchema is the JSON Schema of a reduce output. Defaults to none
	// (nil): any text. A reduce output is itself reduced at the next level, so it
	// should have the shape the reduce task expects of its inputs.
	OutputSchema json.RawMessage
	// GroupSize caps the outputs combined by one reduce call. Defaults to
	// DefaultGroupSize; it must be at least 2.
	GroupSize int
	// MaxBytes caps the bytes of outputs given to one reduce call.
	// Defaults to DefaultMaxBytes; it must not be negative. An output
	// larger than MaxBytes is reduced in a group of its own.
	MaxBytes int
}

// Result is the outcome of a reduce step.
type Result struct {
	// Output is the final output.
	Output json.RawMessage
	// Levels counts the reduce levels run; Calls the reduce agents.
	Levels, Calls int
	// Reduced counts the map outputs reduced.
	Reduced int
}

// Run runs spec over inputs on e like [batchagent.Engine.Run], then
// reduces the successful outputs with cfg like [Outputs]. A nil e is a new
// engine with the default [batchagent.Config]. Failed inputs are left out
// of the reduce (their results say why). The error is non-nil for a nil
// spec or a bad reduce step (wrapping [batchagent.ErrBadJob]), or when the
// reduce itself fails; the map results come back whenever the map ran.
func Run(ctx context.Context, e *batchagent.Engine, spec *batchagent.Spec, inputs batchagent.Inputs, cfg Config) ([]batchagent.Result, Result, error) {
	e, err := engineOr(e)
	if err != nil {
		return nil, Result{}, err
	}
	results, err := e.Run(ctx, spec, inputs)
	if err != nil {
		return nil, Result{}, err
	}
	var outputs []json.RawMessage
	for _, res := range results {
		if res.Err == nil {
			outputs = append(outputs, res.Output)
		}
	}
	rr, err := Outputs(ctx, e, spec, outputs, cfg)
	return results, rr, err
}

// engineOr returns e, or a new engine with the default Config when e is
// nil.
func engineOr(e *batchagent.Engine) (*batchagent.Engine, error) {
	if e != nil {
		return e, nil
	}
	return batchagent.New(batchagent.Config{})
}

// Outputs reduces outputs with cfg on e (nil: a new engine with the
// default Config), using spec's model, priority and limits (its task,
// output schema, tools, tool pool and check are not used): level L runs a
// Spec of its own whose ID is spec's + "/reduce-L", so with the engine's
// checkpoint a reduce resumes like any run. Outputs does not modify
// outputs. It is safe for concurrent use; calls sharing a checkpoint need
// distinct job IDs.
//
// The error wraps [batchagent.ErrBadJob] for an invalid cfg or a nil spec; it is
// also non-nil when outputs is empty or holds invalid JSON, when a level cannot combine any two
// neighbouring outputs within cfg.MaxBytes, or when a reduce agent fails
// (wrapping its [*batchagent.AgentError]). The Result then counts the
// levels and calls run so far.
func Outputs(ctx context.Context, e *batchagent.Engine, spec *batchagent.Spec, outputs []json.RawMessage, cfg Config) (Result, error) {
	if spec == nil {
		return Result{}, badConfig("reduce: nil spec")
	}
	if cfg.Task == "" {
		return Result{}, badConfig("reduce: empty task template")
	}
	if cfg.GroupSize == 0 {
		cfg.GroupSize = DefaultGroupSize
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.GroupSize < 2 || cfg.MaxBytes < 0 {
		return Result{}, badConfig("reduce: group size %d must be at least 2 and max bytes %d not negative", cfg.GroupSize, cfg.MaxBytes)
	}
	if len(outputs) == 0 {
		return Result{}, errors.New("batchagent: reduce: no outputs to reduce")
	}
	for i, o := range outputs {
		if !json.Valid(o) {
			return Result{}, fmt.Errorf("batchagent: reduce: output %d is not valid JSON", i)
		}
	}
	e, err := engineOr(e)
	if err != nil {
		return Result{}, err
	}
	rd := spec.Def()
	rd.Task, rd.OutputSchema, rd.Tools, rd.ToolPool, rd.Check = cfg.Task, cfg.OutputSchema, nil, batchagent.Def{}.ToolPool, nil
	if cfg.System != "" {
		rd.System = cfg.System
	}
	rr := Result{Reduced: len(outputs)}
	items := outputs
	for level := 1; ; level++ {
		groups := group(items, cfg.GroupSize, cfg.MaxBytes)
		if len(items) > 1 && len(groups) == len(items) {
			// Every group holds one output: the level would not shrink,
			// and the reduce would call the model forever.
			return rr, fmt.Errorf("batchagent: reduce level %d: no two neighbouring outputs of its %d fit in max bytes %d together: raise max_bytes",
				level, len(items), cfg.MaxBytes)
		}
		ins := make([]batchagent.Input, len(groups))
		for g, items := range groups {
			arr, err := json.Marshal(items)
			if err != nil {
				return rr, fmt.Errorf("batchagent: reduce level %d group %d: %w", level, g, err)
			}
			ins[g] = batchagent.Input{"outputs": string(arr), "level": level, "group": g}
		}
		rd.ID = fmt.Sprintf("%s/reduce-%d", spec.ID(), level)
		rs, err := batchagent.NewSpec(rd)
		if err != nil {
			return rr, err
		}
		res, err := e.Run(ctx, rs, batchagent.Slice(ins))
		if err != nil {
			return rr, err
		}
		rr.Levels, rr.Calls = level, rr.Calls+len(res)
		next := make([]json.RawMessage, 0, len(res))
		for _, x := range res {
			if x.Err != nil {
				return rr, fmt.Errorf("batchagent: reduce level %d group %d: %w", level, x.Index, x.Err)
			}
			next = append(next, x.Output)
		}
		if len(next) == 1 {
			rr.Output = next[0]
			return rr, nil
		}
		items = next
	}
}

// group splits items in order into groups of at most size items and
// maxBytes bytes; a single item larger than maxBytes makes a group of its
// own.
func group(items []json.RawMessage, size, maxBytes int) [][]json.RawMessage {
	var (
		groups [][]json.RawMessage
		cur    []json.RawMessage
		bytes  int
	)
	for _, it := range items {
		if len(cur) > 0 && (len(cur) == size || bytes+len(it) > maxBytes) {
			groups = append(groups, cur)
			cur, bytes = nil, 0
		}
		cur = append(cur, it)
		bytes += len(it)
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// badConfig returns an error wrapping [batchagent.ErrBadJob], worded as the
// engine words its own ("batchagent: bad job: ...").
func badConfig(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{batchagent.ErrBadJob}, args...)...)
}
