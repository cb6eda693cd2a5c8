package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Error classes. Backends wrap one of them in an [*APIError]; callers test
// with errors.Is.
var (
	// ErrRateLimited: the backend refused the call for exceeding a rate
	// limit (HTTP 429, Bedrock ThrottlingException). Transient.
	ErrRateLimited = errors.New("llm: rate limited")
	// ErrOverloaded: the backend is temporarily over capacity (HTTP 503,
	// 529). Transient.
	ErrOverloaded = errors.New("llm: backend overloaded")
	// ErrServer: the backend failed (HTTP 5xx). Transient.
	ErrServer = errors.New("llm: server error")
	// ErrTimeout: the call timed out on the backend's side or in transit.
	// Transient.
	ErrTimeout = errors.New("llm: backend timeout")
	// ErrConnection: the connection failed or broke mid-response. Transient.
	ErrConnection = errors.New("llm: connection failed")
	// ErrContextLength: the conversation exceeds the model's context window.
	// Permanent.
	ErrContextLength = errors.New("llm: context length exceeded")
	// ErrBadRequest: the backend rejected the request (HTTP 4xx). Permanent.
	ErrBadRequest = errors.New("llm: bad request")
	// ErrAuth: the credentials were refused (HTTP 401, 403). Permanent.
	ErrAuth = errors.New("llm: authentication failed")
	// ErrTruncated: the answer was cut off before it ended, because it
	// outgrew the size cap of [AnswerLimit] (a server that ignores
	// max_tokens) and reading stopped. Not transient: resending the same
	// request would be cut again.
	ErrTruncated = errors.New("llm: answer truncated")
)

// APIError is a failure reported by a backend. It never contains
// credentials.
type APIError struct {
	// Backend names the backend ("openai", "sim", ...).
	Backend string
	// StatusCode is the HTTP status, or zero.
	StatusCode int
	// Message is the backend's explanation.
	Message string
	// RetryAfter is how long the backend asked callers to wait; zero if it
	// did not say.
	RetryAfter time.Duration
	// Err is the class sentinel, or nil.
	Err error
	// RateLimit is what the backend's answer said about the account's
	// rate limits (a 429 carries them too), or nil.
	RateLimit *RateLimitInfo
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Backend, e.StatusCode, msg)
	}
	return fmt.Sprintf("%s: %s", e.Backend, msg)
}

// Unwrap returns the class sentinel.
func (e *APIError) Unwrap() error { return e.Err }

// IsTransient reports whether err is worth retrying: a rate limit, an
// overload, a server error, a backend timeout or a broken connection.
// Context cancellation is never transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrOverloaded) ||
		errors.Is(err, ErrServer) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrConnection)
}

// RateLimitOf returns the rate limits the backend reported with err (see
// [APIError.RateLimit]), or nil.
func RateLimitOf(err error) *RateLimitInfo {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.RateLimit
	}
	return nil
}

// RetryAfter returns the wait the backend asked for in err, or zero.
func RetryAfter(err error) time.Duration {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.RetryAfter
	}
	return 0
}
