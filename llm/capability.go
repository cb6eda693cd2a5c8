package llm

import (
	"context"
	"log/slog"
	"time"
)

// Capabilities is what a backend declares about itself, so the engine can
// use native features and start at a safe concurrency.
type Capabilities struct {
	// Streaming: the Model is also a Streamer.
	Streaming bool
	// NativeTools: tool definitions and calls are sent natively rather than
	// described in the prompt.
	NativeTools bool
	// NativeJSONSchema: Request.Output constrains decoding on the backend
	// (response_format json_schema, or an output tool: forced without
	// tools, offered beside them with tool choice any).
	NativeJSONSchema bool
	// PromptCaching: the backend caches prompt prefixes (automatically, or
	// through markers the backend adds on the shared prefix).
	PromptCaching bool
	// QueueProbe: the Model is a QueueProber.
	QueueProbe bool
	// DefaultConcurrency is a safe number of concurrent calls to start
	// with: low for hosted APIs, the server's slots for self-hosted ones.
	// Zero means no opinion.
	DefaultConcurrency int
	// Media is the content parts the backend takes besides text; the
	// zero value: text only.
	Media Media
	// InProcess: the Model runs in this process (the simulator), not on
	// a server; admission neither gates nor paces it as it does a
	// backend that declares its capabilities.
	InProcess bool
	// Extra is what the backend does with a request's extra fields
	// ([Request.Extra]); the zero value: it takes none.
	Extra ExtraFields
}

// Capable is implemented by Models that declare their capabilities.
// Callers discover it with a type assertion.
type Capable interface {
	Capabilities() Capabilities
}

// QueueDepth is a self-hosted server's load, as its metrics report it.
type QueueDepth struct {
	// Waiting counts requests queued on the server, not yet running.
	Waiting int
	// Running counts requests being processed.
	Running int
}

// QueueProber is implemented by Models that can read their server's queue
// depth (vLLM and SGLang Prometheus gauges, llama.cpp /metrics or /slots).
// The engine uses it to stop admitting requests while the server's queue
// is long, so the server is fed at capacity rather than flooded.
type QueueProber interface {
	QueueDepth(ctx context.Context) (QueueDepth, error)
}

// RateLimitInfo is what a hosted API said about its rate limits in a
// response's headers (x-ratelimit-*, anthropic-ratelimit-*), on
// [Response.RateLimit] and, for a failed call, [APIError.RateLimit]. Zero
// fields were not reported, except that a remaining count is meaningful
// (zero included) whenever its limit is reported: providers send the
// three together.
type RateLimitInfo struct {
	LimitRequests     int64
	RemainingRequests int64
	LimitTokens       int64
	RemainingTokens   int64
	// ResetRequests and ResetTokens are how long until the windows refill.
	ResetRequests time.Duration
	ResetTokens   time.Duration
	// LimitOutputTokens, RemainingOutputTokens and ResetOutputTokens are
	// the output-token limit per minute, what is left of it and how long
	// until it refills, where the API limits output tokens apart
	// (Anthropic's anthropic-ratelimit-output-tokens-*); LimitTokens then
	// counts input tokens only. Zero: not reported.
	LimitOutputTokens     int64
	RemainingOutputTokens int64
	ResetOutputTokens     time.Duration
}

// Secret is a credential. It redacts itself when printed, formatted or
// logged, so an API key never reaches logs, errors or results by accident.
// Use string(s) only where the credential is sent. [Secret.Redact] and
// [Redactor] remove it, in the forms a server may echo it in, from text
// such as an error message.
type Secret string

// String returns a redacted form.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[REDACTED]"
}

// GoString returns a redacted form, for %#v.
func (s Secret) GoString() string { return `llm.Secret("[REDACTED]")` }

// LogValue returns a redacted form for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText returns a redacted form, so encoders never write the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
