package anthropic

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/llm"
)

// exchange watches the one HTTP exchange of a call, through an SDK
// middleware: whether a request went out, the response's status and
// headers, and whether reading its body failed. That tells a broken
// connection from a malformed body, which the SDK reports alike.
type exchange struct {
	// limit sets whether the response body is capped with llm.LimitBody
	// for the token cap maxTokens.
	limit     bool
	maxTokens int
	sent      bool
	resp      *http.Response
	body      *watchedBody
}

func (x *exchange) option() option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		x.sent = true
		resp, err := next(req)
		if resp != nil {
			x.resp = resp
			if resp.Body != nil {
				rc := resp.Body
				if x.limit {
					rc = llm.LimitBody(rc, x.maxTokens)
				}
				x.body = &watchedBody{rc: rc}
				resp.Body = x.body
			}
		}
		return resp, err
	})
}

// readFailed reports whether reading the response body failed.
func (x *exchange) readFailed() error {
	if x.body == nil {
		return nil
	}
	return x.body.err
}

// watchedBody records the first read error of a response body other than
// io.EOF.
type watchedBody struct {
	rc  io.ReadCloser
	err error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.rc.Close() }

// callError turns err, the failure of a call made under ctx through x, into
// what callers get: ctx's own error once ctx is done, else an
// *llm.APIError.
func (m *Model) callError(ctx context.Context, x *exchange, err error) error {
	llm.HideURLs(err) // net/http quotes the request URL, which may hold a token
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if se, ok := errors.AsType[*sdk.Error](err); ok {
		return m.apiError(se)
	}
	switch {
	case !x.sent:
		// The SDK failed before sending anything: the request itself.
		return m.newError(0, "build request: "+err.Error(), llm.ErrBadRequest, 0)
	case errors.Is(x.readFailed(), llm.ErrTruncated):
		return m.newError(0, x.readFailed().Error(), llm.ErrTruncated, 0)
	case isTimeout(err) || isTimeout(x.readFailed()):
		return m.newError(0, "timeout: "+err.Error(), llm.ErrTimeout, 0)
	case x.resp == nil || x.readFailed() != nil:
		return m.newError(0, "connection failed: "+err.Error(), llm.ErrConnection, 0)
	case errors.Is(err, bufio.ErrTooLong):
		return m.newError(0, "malformed response: a stream line is too long", llm.ErrServer, 0)
	default:
		// The body was read whole but could not be decoded.
		return m.newError(0, "malformed response: "+err.Error(), llm.ErrServer, 0)
	}
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// maxRawMessage caps the bytes of an error body that is not Anthropic's
// envelope kept as an error's message.
const maxRawMessage = 256

// errorBody is Anthropic's error envelope, {"type":"error","error":{...}};
// llama.cpp's own errors have the same error object.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// apiError classifies an error response, or an error event of a stream
// (whose status is 200).
func (m *Model) apiError(se *sdk.Error) *llm.APIError {
	status, header := se.StatusCode, http.Header(nil)
	if se.Response != nil {
		status, header = se.Response.StatusCode, se.Response.Header
	}
	return m.statusError(status, header, se.RawJSON(), string(se.Type()))
}

// statusError classifies an error of HTTP status (below 400 for an error
// that came in a success response) with body raw; errType is the error type
// the SDK found, if any.
func (m *Model) statusError(status int, header http.Header, raw, errType string) *llm.APIError {
	var body errorBody
	_ = json.Unmarshal([]byte(raw), &body)
	msg := body.Error.Message
	if body.Error.Type != "" {
		errType = body.Error.Type
	}
	if status < 400 {
		// Its type says what happened.
		status = 0
	}
	if msg == "" {
		// Not Anthropic's envelope: the body itself, shortened.
		msg = strings.TrimSpace(raw)
		if len(msg) > maxRawMessage {
			msg = strings.ToValidUTF8(msg[:maxRawMessage], "") + "..."
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	class := classify(status, errType, msg)
	if class == llm.ErrAuth {
		msg = "authentication failed: check ANTHROPIC_API_KEY: " + msg
	}
	var wait time.Duration
	if header != nil {
		wait = retry.ParseRetryAfter(header, time.Now())
	}
	e := m.newError(status, msg, class, wait)
	if header != nil {
		e.RateLimit = rateLimit(header, time.Now())
	}
	return e
}

// classify returns the error class of an HTTP status (zero for an error
// event of a stream), Anthropic error type and message.
func classify(status int, errType, msg string) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		errType == "authentication_error" || errType == "permission_error":
		return llm.ErrAuth
	case status == http.StatusTooManyRequests || errType == "rate_limit_error":
		return llm.ErrRateLimited
	case status == 529 || status == http.StatusServiceUnavailable || errType == "overloaded_error":
		return llm.ErrOverloaded
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout || errType == "timeout_error":
		return llm.ErrTimeout
	case status == http.StatusBadGateway:
		// A proxy in front of the server could not reach it (a restart,
		// say): a connection failure, retried for the outage budget.
		return llm.ErrConnection
	case status == http.StatusRequestEntityTooLarge || errType == "request_too_large" ||
		errType == "exceed_context_size_error" || (status < 500 && isContextMessage(msg)):
		return llm.ErrContextLength
	case status >= 500 || errType == "api_error":
		return llm.ErrServer
	case status >= 400 || errType != "":
		return llm.ErrBadRequest
	default:
		return llm.ErrServer
	}
}

// isContextMessage reports whether an error message says the prompt does
// not fit the model's context window.
func isContextMessage(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{"prompt is too long", "context window", "context length", "context size", "too many tokens"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// newError returns an *llm.APIError whose message never holds the API key
// (in any of the forms llm.Redactor knows) nor the secret parts of the base
// URL.
func (m *Model) newError(status int, msg string, class error, wait time.Duration) *llm.APIError {
	msg = m.redact.Redact(msg)
	return &llm.APIError{Backend: backendName, StatusCode: status, Message: msg, RetryAfter: wait, Err: class}
}

// rateLimit reads the anthropic-ratelimit-* headers: requests, tokens (or
// input tokens, where only those are reported) and output tokens. Reset times are RFC 3339
// instants, returned as the wait from now. It returns nil when no header is
// present.
func rateLimit(h http.Header, now time.Time) *llm.RateLimitInfo {
	var (
		rl    llm.RateLimitInfo
		found bool
	)
	count := func(name string, dst *int64) {
		if n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64); err == nil && n >= 0 {
			*dst, found = n, true
		}
	}
	reset := func(name string, dst *time.Duration) {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			return
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			*dst, found = max(t.Sub(now), 0), true
		}
	}
	const p = "anthropic-ratelimit-"
	count(p+"requests-limit", &rl.LimitRequests)
	count(p+"requests-remaining", &rl.RemainingRequests)
	reset(p+"requests-reset", &rl.ResetRequests)
	tokens := p + "tokens-"
	if h.Get(tokens+"limit") == "" && h.Get(tokens+"remaining") == "" {
		tokens = p + "input-tokens-"
	}
	count(tokens+"limit", &rl.LimitTokens)
	count(tokens+"remaining", &rl.RemainingTokens)
	reset(tokens+"reset", &rl.ResetTokens)
	count(p+"output-tokens-limit", &rl.LimitOutputTokens)
	count(p+"output-tokens-remaining", &rl.RemainingOutputTokens)
	reset(p+"output-tokens-reset", &rl.ResetOutputTokens)
	if !found {
		return nil
	}
	return &rl
}
