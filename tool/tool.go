package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchagent/batchagent/llm"
)

// Spec describes a tool to the model and to the [Pool]. A Spec is a value;
// the Pool copies it at construction, so later changes to the original have no
// effect.
type Spec struct {
	// Name identifies the tool in calls; it must match [a-zA-Z0-9_-]{1,64}.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Parameters is the JSON Schema of the arguments object. Nil means
	// {"type":"object"}.
	Parameters json.RawMessage
	// Cacheable reports that identical calls may reuse a cached result: the
	// tool's result depends only on its arguments for the cache's lifetime.
	Cacheable bool
	// NotIdempotent reports that, by the tool's own account, a second
	// identical call does more than the first: it sends, writes, charges.
	// An agent then runs a call of the tool only once the answer asking for
	// it has streamed to its end, never mid-stream, so that a stream cut
	// after the call and answered again cannot run it twice
	// ([Pool.Idempotent]). Identical concurrent calls still share one
	// execution; [Policy.NoCoalesce] runs every call. It changes when calls
	// run, not what they return, so it is no part of a checkpointed job's
	// fingerprint (nor of the Spec's JSON).
	NotIdempotent bool `json:"-"`
}

// Tool is a tool agents can call. Implementations must be safe for
// concurrent use: a [Pool] calls them from many goroutines at once.
type Tool interface {
	// Spec describes the tool. The Pool calls it once, in [NewPool].
	Spec() Spec
	// Call executes the tool. args is a JSON object, already canonicalised
	// by the Pool; Call must not modify it. A returned error is reported to
	// the model as the tool's result; wrap [ErrFatal] to end the agent
	// instead. Call should return promptly once ctx is done.
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// Func returns a Tool with the given spec whose Call runs fn. It panics if fn
// is nil, which is a programming error. The returned Tool is safe for
// concurrent use if fn is.
func Func(spec Spec, fn func(ctx context.Context, args json.RawMessage) (string, error)) Tool {
	if fn == nil {
		panic("tool: Func called with a nil function")
	}
	return &funcTool{spec: spec, fn: fn}
}

// funcTool is the Tool returned by Func.
type funcTool struct {
	spec Spec
	fn   func(ctx context.Context, args json.RawMessage) (string, error)
}

func (t *funcTool) Spec() Spec { return t.spec }

func (t *funcTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return t.fn(ctx, args)
}

// ErrFatal marks a tool error that must end the agent instead of going back to
// the model: a tool wraps it (fmt.Errorf("...: %w", tool.ErrFatal)) and the
// agent, testing with errors.Is, fails with error kind "tool".
var ErrFatal = errors.New("tool: fatal")

// ErrUnknownTool is wrapped by the [*CallError] that [Pool.Call] returns for a
// tool name the pool does not have.
var ErrUnknownTool = errors.New("tool: unknown tool")

// ErrBadArguments is wrapped by the [*CallError] that [Pool.Call] returns when
// the arguments are not a well-formed JSON object. Tools may wrap it too when
// the arguments do not fit their schema.
var ErrBadArguments = errors.New("tool: bad arguments")

// DecodeArgs decodes a call's arguments into v, which must be a non-nil
// pointer, as a [Tool.Call] implementation does: strictly, so that a field v
// lacks is an error rather than an argument silently ignored. Only the first
// JSON value of args is read. The error wraps [ErrBadArguments] and ends in
// "; want " and want, an example of the arguments that shows the model what
// to send, as {"path": "<file path>"}. A required argument's field is best a
// pointer, so that its absence can be told from a zero value.
func DecodeArgs(args json.RawMessage, v any, want string) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v; want %s", ErrBadArguments, err, want)
	}
	return nil
}

// ErrTimeout is wrapped by the [*CallError] that [Pool.Call] returns when an
// execution runs past [PoolConfig.Timeout].
var ErrTimeout = errors.New("tool: timed out")

// CallError is the error [Pool.Call] returns for a failed call: the tool's own
// error, a [*PanicError], or one of [ErrUnknownTool], [ErrBadArguments] and
// [ErrTimeout]. The same value may be returned to every caller of a
// coalesced execution; treat it as read-only.
type CallError struct {
	// Tool is the tool name as the caller gave it.
	Tool string
	// Err is the cause.
	Err error
}

// Error returns "tool NAME: CAUSE".
func (e *CallError) Error() string { return "tool " + e.Tool + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// PanicError is a recovered panic of a tool's Call. The Pool reports it, wrapped
// in a [*CallError], to every caller of the execution that panicked.
type PanicError struct {
	// Tool is the name of the tool that panicked.
	Tool string
	// Value is the value passed to panic.
	Value any
	// Stack is the goroutine's stack trace at the time of the panic.
	Stack []byte
}

// Error returns "tool NAME panicked: VALUE". The stack is left out: the text
// goes back to the model.
func (e *PanicError) Error() string { return fmt.Sprintf("tool %s panicked: %v", e.Tool, e.Value) }

// validName reports whether name matches [a-zA-Z0-9_-]{1,64}.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// A MediaTool is a [Tool] whose results may carry media besides text: an
// image, a PDF, a recording the model then reads. The [Pool] calls
// CallMedia instead of Call (Call stays for callers that take text only);
// callers discover it with a type assertion, as [Batcher].
//
// CallMedia returns the result's text and its media parts, each a
// complete [llm.Part] (Data with MediaType, or a URL) that the tool no
// longer modifies: the Pool hands the same parts to every caller of a
// coalesced call and keeps them in its cache, so they are shared and
// read-only. Nil media is a text result, as Call's. Errors are as for
// Call.
type MediaTool interface {
	Tool
	CallMedia(ctx context.Context, args json.RawMessage) (text string, media []llm.Part, err error)
}

// MediaBytes is the size in bytes of media's content: each part's Data
// and URL (a data: URL holds its bytes). It is what
// [PoolConfig.MaxMediaBytes] bounds.
func MediaBytes(media []llm.Part) int64 {
	var n int64
	for i := range media {
		n += int64(len(media[i].Data) + len(media[i].URL))
	}
	return n
}
