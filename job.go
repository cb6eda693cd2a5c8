package batchagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// Defaults of [Job].
const (
	DefaultMaxTurns   = agent.DefaultMaxTurns
	DefaultMaxRetries = agent.DefaultMaxRetries
	DefaultMaxActive  = 1024
	// DefaultMaxTokens is the token cap sent with every model call of a
	// job that sets none: a server left to its own default may generate
	// until its context is full, or without end.
	DefaultMaxTokens = 4096
)

// Job describes a batch: one task template run as one agent per input.
// A Job is a value; the [Engine] built from it keeps its own copy.
type Job struct {
	// ID names the job in errors and logs. Defaults to "job".
	ID string
	// Model answers the agents. Required. The CLI resolves backend URLs
	// (sim://, openai://, ...) into Models.
	Model llm.Model
	// ModelName is passed to the backend; empty means its default.
	ModelName string
	// System is the system prompt, shared by all agents.
	System string
	// Task is the per-input prompt, a template with {field} placeholders
	// filled from each input; "{{" and "}}" are literal braces. Required.
	Task string
	// Tools are the tools agents may call. Names must be unique.
	Tools []tool.Tool
	// OutputSchema is the JSON Schema the final answer must satisfy. Nil
	// means any text is accepted.
	OutputSchema json.RawMessage
	// Check, if set, is a semantic check run on each output after schema
	// validation (for example: "end date after start date"). Its error is
	// sent back to the model like a schema problem and counts against
	// MaxRetries; the output is accepted when it returns nil.
	Check func(output json.RawMessage) error
	// MaxTurns caps each agent's model turns. Defaults to DefaultMaxTurns.
	MaxTurns int
	// MaxInflight caps concurrent model calls. Zero means the backend's
	// declared default concurrency (llm.Capabilities), and unlimited when
	// it declares none. Unless FixedInflight is set, the limit adapts
	// within [1, MaxInflight] (AIMD): halved when the backend rate-limits
	// or is overloaded, raised by one after a window of clean calls,
	// starting from the backend's default when it is lower.
	MaxInflight int
	// FixedInflight keeps the limit at MaxInflight.
	FixedInflight bool
	// RateLimit paces calls to requests and tokens per minute.
	RateLimit RateLimit
	// Backpressure pauses admission while a self-hosted server's queue is
	// long, for backends that can report it.
	Backpressure Backpressure
	// WarmPrefix sends the first model call alone and admits the others
	// only when it returns, so the backend's prefix cache holds the shared
	// prefix before the batch arrives.
	WarmPrefix bool
	// MaxActive caps the agents alive at once, and so memory: results wait
	// in a buffer of this size when the consumer is slow. Defaults to
	// DefaultMaxActive.
	MaxActive int
	// MaxRetries caps retries of a model call after transient errors and,
	// separately, corrections of invalid output. Defaults to
	// DefaultMaxRetries; negative means none.
	MaxRetries int
	// OutageBudget bounds how long one model call is retried while the
	// backend cannot answer for transient reasons: rate limits, overload,
	// failed or broken connections, timeouts. An agent fails on such a
	// cause only once its failures have lasted this long without an answer
	// in between, to it or to another agent (time queued for a slot behind
	// calls being answered is not an outage); meanwhile each retry waits what the backend asked for
	// (Retry-After) or a jittered back-off, a requested wait pauses
	// admission for every agent, and connection failures lower the
	// inflight limit and pause admission with a growing back-off. It also
	// caps the start window of [ErrBackendUnavailable]. Other transient
	// failures (server errors) get MaxRetries retries. Defaults to
	// DefaultOutageBudget (5 minutes); negative means outages too get
	// MaxRetries retries, and no unavailability check.
	OutageBudget time.Duration
	// Timeout bounds each agent. Zero means none.
	Timeout time.Duration
	// Backoff spaces the retries of failed model calls.
	Backoff Backoff
	// MaxTokens caps each generation, and is sent with every call.
	// Defaults to DefaultMaxTokens. An answer cut off at it (finish reason
	// length) is asked again with the cap doubled, up to MaxTokensLimit,
	// and a request for a shorter answer; these retries count against
	// MaxRetries, and an answer still cut fails with KindTruncated. The
	// client also stops reading an answer larger than
	// llm.AnswerLimit(MaxTokens) bytes (a server that ignores the cap),
	// which fails with KindTruncated at once. Servers that count the cap
	// against the context window (vLLM, OpenAI, batchagent sim serve)
	// refuse a prompt plus MaxTokens over it: lower MaxTokens for a model
	// with a small window.
	MaxTokens int
	// MaxTokensLimit caps the token cap of a truncated answer's retries.
	// Defaults to 4×MaxTokens; set it to MaxTokens to keep the cap and
	// only ask for a shorter answer (some models refuse a larger one).
	// Below MaxTokens (or its default) it is an error.
	MaxTokensLimit int
	// Temperature and TopP, when set, override the backend's sampling
	// defaults; Seed, when set, asks for deterministic sampling where the
	// backend supports it (OpenAI-compatible servers); Stop lists sequences
	// that end a generation. Nil and empty mean the backend's defaults. See
	// [llm.Request] for how each backend sends them.
	Temperature, TopP *float64
	Seed              *int64
	Stop              []string
	// ToolPool configures the shared tool pool (cache size and TTL, result
	// size cap, per-call timeout).
	ToolPool tool.PoolConfig
	// OnResult, if set, is called once per result in completion order,
	// serially, before the result is returned or yielded. It runs outside
	// the agents: a slow callback delays delivery, not the agents, until
	// MaxActive results are waiting.
	OnResult OnResultFunc
	// Checkpoint, if set, saves every completed turn and final result, and
	// a run resumes from what it holds: finished inputs are not run again
	// (their saved results are delivered), unfinished agents continue from
	// their last completed turn. Nil means no checkpointing.
	Checkpoint Checkpointer
	// RetryFailed, with Checkpoint, runs inputs whose saved result is a
	// failure again.
	RetryFailed bool
	// StopOnCheckpointError, with Checkpoint, makes a failed save fatal:
	// the engine drains (see [Engine.Drain]: no more inputs are admitted,
	// agents stop after their turn in flight), and an agent whose final
	// state could not be saved yields, instead of its outcome, a result of
	// kind [KindCanceled] whose error wraps [ErrCheckpoint]; so every
	// result delivered as done or failed is one a resumed run finds.
	// Stats.CheckpointErrors counts the failed saves. False means a failed
	// save is logged and counted, and the result delivered all the same.
	StopOnCheckpointError bool
	// Logger receives lifecycle events and warnings. Nil means silent.
	Logger *slog.Logger
}

// Backoff spaces retries of transient backend failures: exponential
// back-off with full jitter, or the wait the backend asked for
// (Retry-After). The zero value uses the defaults.
type Backoff struct {
	// Base is the back-off ceiling of a first retry; it doubles with each
	// attempt. Defaults to 50ms: without a rate-limit signal a quick retry
	// costs little.
	Base time.Duration
	// RateLimitBase replaces Base after a rate-limit error that came
	// without a Retry-After. Defaults to 1s.
	RateLimitBase time.Duration
	// Max caps every wait. Defaults to 30s.
	Max time.Duration
}

// OnResultFunc receives each result as it completes.
type OnResultFunc func(Result)

// ErrBadJob is wrapped by the error [New], [Run] and [Stream] return for an
// invalid job.
var ErrBadJob = errors.New("batchagent: bad job")

func badJob(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadJob}, args...)...)
}

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
