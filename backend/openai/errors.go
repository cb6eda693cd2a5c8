package openai

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/llm"
)

// maxErrorBody caps how much of an error response is read, and
// maxMessage how much of the server's explanation an error keeps.
const (
	maxErrorBody = 1 << 20
	maxMessage   = 2000
)

// errorf returns an *llm.APIError of class with a formatted message.
func (m *Model) errorf(status int, class error, format string, args ...any) *llm.APIError {
	return &llm.APIError{Backend: m.name, StatusCode: status, Message: m.scrub(fmt.Sprintf(format, args...)), Err: class}
}

// callError turns what the SDK returned for a failed call into the error
// Generate and Stream report. raw is the HTTP response, if one came back:
// for statuses of 400 and above the SDK has already buffered its body.
func (m *Model) callError(ctx context.Context, raw *http.Response, err error) error {
	llm.HideURLs(err) // net/http quotes the request URL, which may hold a token
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", m.name, ctx.Err())
	}
	if raw != nil && raw.StatusCode >= 400 {
		return m.statusError(raw)
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return m.transportError(ctx, err)
	}
	// Anything else failed before the request was sent: a body that could
	// not be encoded or a client misconfiguration.
	return m.errorf(0, llm.ErrBadRequest, "%v", err)
}

// transportError classifies a failure to send a request or to read its
// response: a timeout (other than ctx's) is ErrTimeout, an oversized SSE
// line ErrServer, anything else (refused, reset, cut) ErrConnection.
func (m *Model) transportError(ctx context.Context, err error) error {
	llm.HideURLs(err)
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", m.name, ctx.Err())
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return m.errorf(0, llm.ErrServer, "stream line too long: %v", err)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return m.errorf(0, llm.ErrTimeout, "%v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The HTTP client's own timeout, not ctx's.
		return m.errorf(0, llm.ErrTimeout, "%v", err)
	}
	return m.errorf(0, llm.ErrConnection, "%v", err)
}

// statusError classifies an HTTP error response:
//
//   - 401, 403: ErrAuth
//   - 408, 504: ErrTimeout
//   - 429: ErrRateLimited (but OpenAI's insufficient_quota, which no wait
//     cures: ErrBadRequest)
//   - 503, 529: ErrOverloaded
//   - 502 (a proxy that could not reach the server): ErrConnection
//   - 500 from llama.cpp failing to parse the request body
//     ("[json.exception..."): ErrBadRequest, since resending the same body
//     fails the same way
//   - other 5xx: ErrServer
//   - 4xx whose type, code or message says the prompt exceeds the context
//     window: ErrContextLength
//   - other 4xx: ErrBadRequest
//
// RetryAfter comes from retry-after-ms or Retry-After.
func (m *Model) statusError(resp *http.Response) *llm.APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg, typ, code := oaiwire.ParseError(body)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	class := classify(resp.StatusCode, typ, code, msg)
	msg = truncate(msg)
	if class == llm.ErrAuth {
		msg = "authentication failed: check OPENAI_API_KEY: " + msg
	}
	if id := resp.Header.Get("x-request-id"); id != "" {
		msg += " (request " + id + ")"
	}
	return &llm.APIError{
		Backend:    m.name,
		StatusCode: resp.StatusCode,
		Message:    m.scrub(msg),
		RetryAfter: retry.ParseRetryAfter(resp.Header, time.Now()),
		Err:        class,
		RateLimit:  rateLimit(resp.Header),
	}
}

// classify returns the class of an error with HTTP status (zero for an
// error event inside a stream), type, code and message.
func classify(status int, typ, code, msg string) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.ErrAuth
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return llm.ErrTimeout
	case status == http.StatusTooManyRequests:
		if code == "insufficient_quota" || typ == "insufficient_quota" {
			return llm.ErrBadRequest
		}
		return llm.ErrRateLimited
	case status == http.StatusServiceUnavailable || status == 529:
		return llm.ErrOverloaded
	case status == http.StatusBadGateway:
		// A proxy in front of the server could not reach it (a restart,
		// say): a connection failure, retried for the outage budget.
		return llm.ErrConnection
	case status == http.StatusInternalServerError && strings.HasPrefix(msg, "[json.exception."):
		return llm.ErrBadRequest
	case status >= 500:
		return llm.ErrServer
	case contextExceeded(typ, code, msg):
		return llm.ErrContextLength
	case status >= 400:
		return llm.ErrBadRequest
	default:
		return llm.ErrServer
	}
}

// contextExceeded reports whether an error says the prompt does not fit
// the model's context window, in the words of OpenAI
// (context_length_exceeded), llama.cpp (exceed_context_size_error), vLLM
// ("maximum context length", "maximum model length") and SGLang ("longer
// than the model's context length").
func contextExceeded(typ, code, msg string) bool {
	for _, s := range []string{typ, code} {
		if s == "context_length_exceeded" || s == "exceed_context_size_error" {
			return true
		}
	}
	msg = strings.ToLower(msg)
	for _, s := range []string{"context length", "context_length", "context window", "context size", "maximum model length", "max_model_len"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// inlineError classifies an error object that came after an HTTP 200, as
// a stream event or as the body itself (vLLM and SGLang report failures
// that arise mid-generation this way): by its code when that is an HTTP
// status, else as a server failure, or a context overflow when it says so.
func (m *Model) inlineError(raw []byte) *llm.APIError {
	msg, typ, code := oaiwire.ParseError(raw)
	if msg == "" {
		msg = "error object after HTTP 200"
	}
	var status int
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n < 600 {
		status = n
	}
	return m.errorf(0, classify(status, typ, code, msg), "%s", truncate(msg))
}

// truncate shortens s to maxMessage bytes of valid UTF-8.
func truncate(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
