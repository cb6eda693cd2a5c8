package job

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
	"github.com/batchagent/batchagent/tool"
)

// Priority is a job's priority class on a backend it shares with other
// jobs: every waiting model call of a higher class gets a free slot before
// any of a lower class; within a class, agents with more turns done go
// first, then the earliest.
type Priority int

// The priority classes.
const (
	// Batch is the class of bulk work: runs over many inputs.
	Batch Priority = 0
	// Interactive is the class of work someone waits for: a request to
	// the gateway, a game loop's plan. It overtakes batch work.
	Interactive Priority = 1
)

// String returns "batch" or "interactive".
func (p Priority) String() string {
	switch p {
	case Batch:
		return "batch"
	case Interactive:
		return "interactive"
	}
	return fmt.Sprintf("priority(%d)", int(p))
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

// Def describes a job: what to run for each input. [NewSpec] validates and
// compiles it into a [Spec]. Only Model and Task are required.
type Def struct {
	// ID names the job in errors, logs and checkpoints: states are saved
	// under it. Defaults to "job".
	ID string
	// Model answers the agents. Required. The CLI resolves backend URLs
	// (sim://, openai://, ...) into Models. Jobs whose Model and ModelName
	// are equal share that backend's admission on an engine.
	Model llm.Model
	// ModelName is passed to the backend. Defaults to "" (the backend's
	// default model).
	ModelName string
	// System is the system prompt, shared by all agents. Defaults to none.
	System string
	// Task is the per-input prompt, a template with {field} placeholders
	// filled from each input; "{{" and "}}" are literal braces. Required.
	Task string
	// Tools are the tools agents may call. Names must be unique. Defaults
	// to none.
	Tools []Tool
	// ToolPool configures the spec's tool pool (cache size and TTL, result
	// size cap, per-call timeout, per-tool policies). Defaults to
	// tool.PoolConfig's defaults.
	ToolPool tool.PoolConfig
	// OutputSchema is the JSON Schema the final answer must satisfy.
	// Defaults to none: any text is accepted.
	OutputSchema json.RawMessage
	// Check, if set, is a semantic check run on each output after schema
	// validation (for example: "end date after start date"). Its error is
	// sent back to the model like a schema problem and counts against
	// MaxRetries; the output is accepted when it returns nil. Defaults to
	// none. It is called from many goroutines at once.
	Check func(output json.RawMessage) error
	// MaxTurns caps each agent's model turns. Defaults to DefaultMaxTurns.
	MaxTurns int
	// MaxRetries caps retries of a model call after transient errors and,
	// separately, corrections of invalid output. Defaults to
	// DefaultMaxRetries; NoRetries sets none.
	MaxRetries int
	// NoRetries means no retries at all: MaxRetries must then be zero.
	NoRetries bool
	// OutageBudget bounds how long one model call is retried while the
	// backend cannot answer for transient reasons (rate limits, overload,
	// failed or broken connections, timeouts): an agent fails on such a
	// cause only once its failures have lasted this long without an answer
	// in between, to it or to another agent. Defaults to
	// DefaultOutageBudget (5 minutes); NoOutageBudget gives outages only
	// MaxRetries retries, like other transient failures.
	OutageBudget time.Duration
	// NoOutageBudget turns the outage budget off: OutageBudget must then be
	// zero.
	NoOutageBudget bool
	// Timeout bounds each agent. Defaults to none.
	Timeout time.Duration
	// Backoff spaces the retries of failed model calls. Defaults to
	// Backoff's defaults.
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
	// ContextWindow is the model's context window in tokens. A
	// conversation whose estimated prompt plus MaxTokens comes near it is
	// compacted before the call: older tool results are shortened, then
	// older turns dropped, every tool call keeping its result (see
	// Result.Compactions). Zero means unknown: the window is learnt from
	// the server's first refusal of a prompt's length, which is compacted
	// and sent again instead of failing. The CLI fills it from a built-in
	// table for well-known models when the job file does not set it.
	ContextWindow int
	// MaxTokensLimit caps the token cap of a truncated answer's retries.
	// Defaults to 4×MaxTokens; set it to MaxTokens to keep the cap and
	// only ask for a shorter answer (some models refuse a larger one).
	// Below MaxTokens (or its default) it is an error.
	MaxTokensLimit int
	// Temperature and TopP, when set, override the backend's sampling
	// defaults; Seed, when set, asks for deterministic sampling where the
	// backend supports it (OpenAI-compatible servers); Stop lists sequences
	// that end a generation. Default to nil and empty: the backend's
	// defaults. See [llm.Request] for how each backend sends them.
	Temperature, TopP *float64
	Seed              *int64
	Stop              []string
	// Priority is the job's class on a shared backend. Defaults to Batch.
	Priority Priority
	// Budget is each agent's time budget when the job has Fallbacks: once
	// it runs out, the agent's result comes from the next tier instead of
	// an error, and Result.Tier says which tier answered. Defaults to
	// DefaultBudget (60s); the CLI's BATCHAGENT_BUDGET overrides the
	// default. Without Fallbacks it is unused: Timeout bounds the agent.
	// Timeout, when set, still bounds the agent with all its tiers: once
	// it ends no tier runs.
	Budget time.Duration
	// Fallbacks are the tiers tried in order after the primary model
	// (tier 0) fails on its backend or runs out of budget. Defaults to
	// none.
	Fallbacks []Fallback
	// Pack lets agents share model calls; see [Pack]. Defaults to none:
	// every agent makes its own calls.
	Pack Pack
	// Media are the media items each agent's first message carries after
	// the task's text, each rendered from its input and loaded by
	// MediaLoader when the agent starts. The model (and each fallback's)
	// must take every field's kind as bytes (llm.Capabilities.Media).
	// Defaults to none: a text-only task. An agent with media is never
	// packed.
	Media []MediaField
	// MediaLoader reads the media of Media. Required when Media is set.
	MediaLoader MediaLoader
}

// Tool is a tool agents may call; see package tool.
type Tool = tool.Tool

// Defaults of [Def].
const (
	DefaultMaxTurns     = 8
	DefaultMaxRetries   = 2
	DefaultOutageBudget = 5 * time.Minute
	// DefaultMaxTokens is the token cap sent with every model call of a
	// job that sets none: a server left to its own default may generate
	// until its context is full, or without end.
	DefaultMaxTokens = 4096
)

// ErrBadSpec is wrapped by the error [NewSpec] returns for an invalid
// [Def].
var ErrBadSpec = errors.New("batchagent: bad job")

// Spec is a validated, compiled job: its template parsed, its output
// schema compiled and its tools in a pool. It is immutable and safe for
// concurrent use; every engine and run may share one. The tool pool, and
// so its cache of tool results, lives as long as the Spec.
type Spec struct {
	def    Def
	tmpl   *Template
	schema *schema.Schema // nil: any text
	pool   *tool.Pool     // nil: no tools
	fp     map[string]string
	media  *MediaSet // nil: a text-only task
}

func badSpec(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadSpec}, args...)...)
}

// NewSpec validates d, fills its defaults and compiles it. The error wraps
// [ErrBadSpec] and says what is wrong. NewSpec copies what d refers to
// (tools, schema, stop sequences), so changing d afterwards changes
// nothing.
func NewSpec(d Def) (*Spec, error) {
	if d.ID == "" {
		d.ID = "job"
	}
	if d.Model == nil {
		return nil, badSpec("no model")
	}
	if d.Task == "" && len(d.Media) == 0 {
		return nil, badSpec("empty task template")
	}
	if d.MaxTurns < 0 || d.MaxRetries < 0 || d.Timeout < 0 || d.MaxTokens < 0 || d.MaxTokensLimit < 0 || d.OutageBudget < 0 || d.ContextWindow < 0 {
		return nil, badSpec("negative limit (max turns %d, max retries %d, timeout %v, max tokens %d, max tokens limit %d, outage budget %v, context window %d)",
			d.MaxTurns, d.MaxRetries, d.Timeout, d.MaxTokens, d.MaxTokensLimit, d.OutageBudget, d.ContextWindow)
	}
	if d.NoRetries && d.MaxRetries != 0 {
		return nil, badSpec("no retries contradicts max retries %d", d.MaxRetries)
	}
	if d.NoOutageBudget && d.OutageBudget != 0 {
		return nil, badSpec("no outage budget contradicts outage budget %v", d.OutageBudget)
	}
	if d.Backoff.Base < 0 || d.Backoff.RateLimitBase < 0 || d.Backoff.Max < 0 {
		return nil, badSpec("negative backoff %+v", d.Backoff)
	}
	if t := d.Temperature; t != nil && !(*t >= 0 && *t <= math.MaxFloat64) {
		return nil, badSpec("temperature %v: want a finite number from 0 up", *t)
	}
	if p := d.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		return nil, badSpec("top_p %v: want a number from 0 to 1", *p)
	}
	if d.Budget < 0 {
		return nil, badSpec("negative budget %v", d.Budget)
	}
	if d.Budget > 0 && d.Budget < MinBudget {
		return nil, badSpec("budget %v: below the %v minimum, which no model call could meet", d.Budget, MinBudget)
	}
	for i, f := range d.Fallbacks {
		if (f.Model == nil) == (f.Func == nil) {
			return nil, badSpec("fallback %d: want exactly one of a model and a func", i+1)
		}
	}
	if len(d.Fallbacks) > 0 && d.Budget == 0 {
		d.Budget = DefaultBudget
	}
	if d.Pack.MaxAgents < 0 || d.Pack.MaxPromptTokens < 0 {
		return nil, badSpec("negative pack limit (max agents %d, max prompt tokens %d)", d.Pack.MaxAgents, d.Pack.MaxPromptTokens)
	}
	if d.Pack.MaxPromptTokens > 0 && !d.Pack.On() {
		return nil, badSpec("pack max prompt tokens %d without max agents of 2 or more", d.Pack.MaxPromptTokens)
	}
	if d.Pack.Verify < 0 || d.Pack.Verify > 1 || d.Pack.MinAgreement < 0 || d.Pack.MinAgreement > 1 {
		return nil, badSpec("pack verify %g and min agreement %g must be between 0 and 1", d.Pack.Verify, d.Pack.MinAgreement)
	}
	if (d.Pack.Auto || d.Pack.Verify > 0) && !d.Pack.On() {
		return nil, badSpec("pack auto or verify without max agents of 2 or more")
	}
	if d.Pack.On() {
		if d.Pack.Verify > 0 && d.Pack.MinAgreement == 0 {
			d.Pack.MinAgreement = DefaultPackMinAgreement
		}
		if len(d.Tools) > 0 {
			return nil, badSpec("pack: agents with tools cannot be packed (a packed agent gets one answer, no tool turns)")
		}
		if err := packable(d.OutputSchema); err != nil {
			return nil, badSpec("%v", err)
		}
		if d.Pack.MaxPromptTokens == 0 {
			d.Pack.MaxPromptTokens = DefaultPackPromptTokens
		}
	}
	if d.Priority != Batch && d.Priority != Interactive {
		return nil, badSpec("unknown priority class %d", int(d.Priority))
	}
	if d.MaxTurns == 0 {
		d.MaxTurns = DefaultMaxTurns
	}
	switch {
	case d.NoRetries:
	case d.MaxRetries == 0:
		d.MaxRetries = DefaultMaxRetries
	}
	if d.OutageBudget == 0 && !d.NoOutageBudget {
		d.OutageBudget = DefaultOutageBudget
	}
	if d.MaxTokens == 0 {
		d.MaxTokens = DefaultMaxTokens
	}
	if d.MaxTokensLimit > 0 && d.MaxTokensLimit < d.MaxTokens {
		// It would be raised to MaxTokens silently.
		return nil, badSpec("max tokens limit %d is below max tokens %d (the default when unset)", d.MaxTokensLimit, d.MaxTokens)
	}
	if d.ContextWindow > 0 && d.MaxTokens >= d.ContextWindow {
		return nil, badSpec("max tokens %d (the default when unset) leaves no room for a prompt in the context window of %d tokens", d.MaxTokens, d.ContextWindow)
	}
	d.Tools = slices.Clone(d.Tools)
	d.OutputSchema = slices.Clone(d.OutputSchema)
	d.Stop = slices.Clone(d.Stop)
	d.Fallbacks = slices.Clone(d.Fallbacks)
	d.Media = slices.Clone(d.Media)
	s := &Spec{def: d}
	var err error
	if s.tmpl, err = ParseTemplate(d.Task); err != nil {
		return nil, badSpec("task: %v", err)
	}
	if s.media, err = compileMedia(d); err != nil {
		return nil, err
	}
	if len(d.OutputSchema) > 0 {
		if s.schema, err = schema.Compile(d.OutputSchema); err != nil {
			return nil, badSpec("output schema: %v", err)
		}
	}
	if len(d.Tools) > 0 {
		if s.pool, err = tool.NewPool(d.Tools, d.ToolPool); err != nil {
			return nil, badSpec("tools: %v", err)
		}
	} else if len(d.ToolPool.Policies) > 0 {
		return nil, badSpec("tool policies for a job without tools")
	}
	s.fp = fingerprint(d)
	return s, nil
}

// Def returns the spec's definition, defaults filled in. Its slices are
// copies.
func (s *Spec) Def() Def {
	d := s.def
	d.Tools = slices.Clone(d.Tools)
	d.OutputSchema = slices.Clone(d.OutputSchema)
	d.Stop = slices.Clone(d.Stop)
	d.Fallbacks = slices.Clone(d.Fallbacks)
	d.Media = slices.Clone(d.Media)
	return d
}

// ID returns the job's ID.
func (s *Spec) ID() string { return s.def.ID }

// Model returns the job's model and the model name sent to it.
func (s *Spec) Model() (llm.Model, string) { return s.def.Model, s.def.ModelName }

// Priority returns the job's priority class.
func (s *Spec) Priority() Priority { return s.def.Priority }

// Template returns the parsed task template.
func (s *Spec) Template() *Template { return s.tmpl }

// Schema returns the compiled output schema, or nil when any text is
// accepted.
func (s *Spec) Schema() *schema.Schema { return s.schema }

// Pool returns the tool pool, or nil when the job has no tools.
func (s *Spec) Pool() *tool.Pool { return s.pool }

// Fingerprint returns the parts that identify the job for a checkpointed
// run, each hashed: the system prompt, the task template, the output
// schema, the tool definitions and the model name, and, when any is set,
// the sampling settings (temperature, top_p, seed, stop). A run resumed
// with different parts would mix two jobs' outputs. A job that sets no
// sampling setting has no "sampling" part, so its fingerprint is the one
// that versions without these settings recorded. The map is a copy.
func (s *Spec) Fingerprint() map[string]string {
	fp := make(map[string]string, len(s.fp))
	for k, v := range s.fp {
		fp[k] = v
	}
	return fp
}

func fingerprint(d Def) map[string]string {
	specs := make([]tool.Spec, len(d.Tools))
	for i, t := range d.Tools {
		specs[i] = t.Spec()
	}
	// The pool checked that parameters are JSON: Marshal cannot fail.
	tools, _ := json.Marshal(specs)
	parts := map[string][]byte{
		"system": []byte(d.System),
		"task":   []byte(d.Task),
		"schema": d.OutputSchema,
		"tools":  tools,
		"model":  []byte(d.ModelName),
	}
	if len(d.Media) > 0 {
		// Only a job with media has the part: text jobs keep their
		// fingerprints. Marshal cannot fail on strings.
		parts["media"], _ = json.Marshal(d.Media)
	}
	if d.Temperature != nil || d.TopP != nil || d.Seed != nil || len(d.Stop) > 0 {
		// Marshal cannot fail on these types; NaN is refused.
		parts["sampling"], _ = json.Marshal(struct {
			Temperature, TopP *float64
			Seed              *int64
			Stop              []string
		}{d.Temperature, d.TopP, d.Seed, d.Stop})
	}
	fp := make(map[string]string, len(parts))
	for k, v := range parts {
		sum := sha256.Sum256(v)
		fp[k] = hex.EncodeToString(sum[:12])
	}
	return fp
}
