package batchagent

import (
	"io"
	"iter"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// Defaults of [Def].
const (
	DefaultMaxTurns     = job.DefaultMaxTurns
	DefaultMaxRetries   = job.DefaultMaxRetries
	DefaultMaxTokens    = job.DefaultMaxTokens
	DefaultOutageBudget = job.DefaultOutageBudget
)

// Def describes a job: a model, a system prompt, a task template with
// {field} placeholders, tools, an output schema and the limits of each
// agent. [NewSpec] compiles it into a [Spec]. See [job.Def] for every
// field.
type Def = job.Def

// Spec is a compiled job: immutable, safe to share between goroutines and
// engines. See [job.Spec].
type Spec = job.Spec

// Backoff spaces retries of transient backend failures. See [job.Backoff].
type Backoff = job.Backoff

// Priority is a job's priority class on a shared backend: [Interactive]
// work overtakes [Batch] work.
type Priority = job.Priority

// The priority classes.
const (
	Batch       = job.Batch
	Interactive = job.Interactive
)

// ErrBadJob is wrapped by the error [NewSpec] returns for an invalid
// [Def], and by the error of the package-level [Run], [Stream] and
// [RunTyped] for an invalid output type.
var ErrBadJob = job.ErrBadSpec

// NewSpec validates d, fills its defaults and compiles it: template parsed,
// output schema compiled, tools in a pool. The error wraps [ErrBadJob] and
// says what is wrong.
func NewSpec(d Def) (*Spec, error) { return job.NewSpec(d) }

// Input is one input: field name → value, as used by the task template.
type Input = job.Input

// Inputs is a sequence of inputs. A non-nil error marks an input that could
// not be decoded (for example a malformed line); it becomes that input's
// result, of kind [KindInput], and the sequence continues.
type Inputs = iter.Seq2[Input, error]

// InputError reports an input that could not be read or decoded, naming its
// source and line: the error [JSONL] and [CSV] yield for it.
type InputError = input.Error

// Slice returns the inputs of a slice. The slice is not copied.
func Slice(in []Input) Inputs { return input.Slice(in) }

// JSONL reads inputs lazily from r, one JSON object per line. source names
// r in errors (a file name, or "").
func JSONL(r io.Reader, source string) Inputs { return input.JSONL(r, source) }

// CSV reads inputs lazily from r: a header row, then one input per record.
// source names r in errors.
func CSV(r io.Reader, source string) Inputs { return input.CSV(r, source) }
