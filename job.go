package batchagent

import (
	"io"
	"iter"
	"time"

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

// Fallback is a tier a job's agents fall back to: another model or a Go
// function. See [job.Fallback] and [Def].Fallbacks.
type Fallback = job.Fallback

// DefaultBudget is the time budget of each agent of a job with fallbacks
// that sets none; BudgetEnv overrides it in the CLI.
const DefaultBudget = job.DefaultBudget

// MinBudget is the shortest budget a spec accepts. See [job.MinBudget].
const MinBudget = job.MinBudget

// BudgetEnv names the environment variable the CLI reads for the default
// budget: a Go duration such as "2s".
const BudgetEnv = job.BudgetEnv

// BudgetFrom returns the budget BudgetEnv sets through getenv, or 0 when
// it is unset. See [job.BudgetFrom].
func BudgetFrom(getenv func(string) string) (time.Duration, error) { return job.BudgetFrom(getenv) }

// Pack lets a job's agents share model calls: tiny tasks grouped into one
// call whose answer is a JSON object keyed by agent, each result delivered
// as its value streams in. See [job.Pack] and [Def].Pack.
type Pack = job.Pack

// DefaultPackPromptTokens is Pack.MaxPromptTokens when unset.
const DefaultPackPromptTokens = job.DefaultPackPromptTokens
