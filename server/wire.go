package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// apiError is an error answer in OpenAI's format:
// {"error":{"message","type","param","code"}}.
type apiError struct {
	status     int
	typ, code  string
	param      string // "" is written as null
	message    string
	retryAfter time.Duration // sent as Retry-After (whole seconds, rounded up) when > 0
	closeConn  bool          // the connection closes after the answer ("Connection: close")
	// logged says the message hides a cause that the server's log holds
	// under the request's id, which the message then names.
	logged bool
}

func (e *apiError) Error() string { return e.message }

func badParam(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_value", param: param, message: msg}
}

var (
	errNotFound    = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: "no such endpoint"}
	errMethod      = &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", code: "method_not_allowed", message: "method not allowed"}
	errAuth        = &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key", closeConn: true, message: "incorrect or missing API key: send it as \"Authorization: Bearer KEY\""}
	errShutdown    = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", closeConn: true, retryAfter: time.Second, message: "the server is shutting down: try again, or another server"}
	errConcurrency = &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded", message: "too many concurrent requests for this API key", retryAfter: time.Second}
)

// body is the error object; requestID, when e's cause is logged, is named
// in its message.
func (e *apiError) body(requestID string) []byte {
	b := oaiwire.ErrorBody{Message: e.message, Type: e.typ, Param: e.param, Code: e.code}
	if e.logged && requestID != "" {
		b.Message += " (request id " + requestID + ": the server's log has the cause)"
	}
	return b.AppendJSON(nil)
}

// writeError writes e as the answer; the request's id is the
// X-Request-Id header already set on w.
func writeError(w http.ResponseWriter, e *apiError) {
	oaiwire.WriteError(w, e.status, e.body(w.Header().Get(requestIDHeader)), e.retryAfter, e.closeConn)
}

// errorOf maps the failure of a model call or an agent to the answer the
// client gets. Its message says what failed in words of the API, never
// the cause's own text, which may name the gateway's upstream addresses
// or its environment variables: that goes to the server's log, under the
// request's id, which the message names. Only a backend's refusal of the
// request itself (400, context length) passes on the backend's words,
// which are about the client's request.
//
//   - the engine shutting down: 503 with Retry-After
//   - the backend declared unavailable: 503 backend_unavailable
//   - the backend rate-limited: 429 with its Retry-After (at least 1s)
//   - the backend overloaded: 503 (with its Retry-After, if any)
//   - the backend refused the gateway's credentials: 502 upstream_auth
//   - the prompt too long for the context: 400 context_length_exceeded
//   - the backend refused the request: 400 with its message
//   - the backend unreachable or the connection cut: 502
//   - a timeout (the backend's or RequestTimeout): 504
//   - anything else (the backend's 5xx, an agent that failed): 500
func errorOf(err error) *apiError {
	if ae, ok := errors.AsType[*apiError](err); ok {
		return ae
	}
	if errors.Is(err, batchagent.ErrShutdown) || errors.Is(err, errDraining) {
		return errShutdown
	}
	if errors.Is(err, errGraceOver) {
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", closeConn: true,
			message: "the server shut down before the answer was whole"}
	}
	e := &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", logged: true,
		message: "the request failed"}
	if ae, ok := errors.AsType[*batchagent.AgentError](err); ok && ae.Kind != "" {
		e.code, e.message = "agent_"+string(ae.Kind), fmt.Sprintf("the agent failed (%s)", ae.Kind)
	}
	// upstream is the backend's own words about the request, when it
	// answered with an error status.
	upstream := func(fallback string) string {
		if ae, ok := errors.AsType[*llm.APIError](err); ok && ae.StatusCode >= 400 && ae.Message != "" {
			return ae.Message
		}
		return fallback
	}
	switch {
	case errors.Is(err, batchagent.ErrBackendUnavailable):
		e.status, e.code = http.StatusServiceUnavailable, "backend_unavailable"
		e.message = "the backend is unavailable for now"
	case errors.Is(err, llm.ErrRateLimited):
		e.status, e.typ, e.code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
		e.retryAfter = max(llm.RetryAfter(err), time.Second)
		e.message = "the backend is rate limiting requests"
	case errors.Is(err, llm.ErrOverloaded):
		e.status, e.code = http.StatusServiceUnavailable, "overloaded"
		e.retryAfter = llm.RetryAfter(err)
		e.message = "the backend is overloaded"
	case errors.Is(err, llm.ErrAuth):
		e.status, e.code = http.StatusBadGateway, "upstream_auth"
		e.message = "the backend refused the gateway's credentials"
	case errors.Is(err, llm.ErrContextLength):
		e.status, e.typ, e.code = http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
		e.message, e.logged = upstream("the prompt does not fit the model's context window"), false
	case errors.Is(err, llm.ErrBadRequest):
		e.status, e.typ, e.code = http.StatusBadRequest, "invalid_request_error", "invalid_value"
		e.message = upstream("the backend refused the request")
		e.logged = e.message == "the backend refused the request"
	case errors.Is(err, llm.ErrConnection):
		e.status, e.code = http.StatusBadGateway, "backend_unreachable"
		e.message = "the backend could not be reached, or its connection was cut"
	case errors.Is(err, llm.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		e.status, e.code = http.StatusGatewayTimeout, "timeout"
		e.message = "the answer did not come in time"
	case errors.Is(err, llm.ErrServer):
		e.message = "the backend failed"
	}
	return e
}

// Event is one step of an agent's progress, streamed in agent mode as
// the "batchagent_event" field of a chunk's delta (and listed under
// "batchagent_events" in a non-streamed message).
type Event struct {
	// Type is "turn" (a model turn begins), "tool_call" (with Tool and
	// Arguments), "tool_result" (with Tool and Summary, or Error) or
	// "retry" (the answer went back for correction, with Feedback).
	Type string `json:"type"`
	// Turn is the agent's model turn, from 0.
	Turn      int             `json:"turn"`
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Summary is the start of the tool's result, at most 200 bytes.
	Summary  string `json:"summary,omitempty"`
	Error    string `json:"error,omitempty"`
	Feedback string `json:"feedback,omitempty"`
}

// text is the event as one line of reasoning text.
func (e *Event) text() string {
	switch e.Type {
	case "turn":
		return fmt.Sprintf("turn %d\n", e.Turn)
	case "tool_call":
		return fmt.Sprintf("calling %s %s\n", e.Tool, e.Arguments)
	case "tool_result":
		if e.Error != "" {
			return fmt.Sprintf("%s failed: %s\n", e.Tool, e.Error)
		}
		return fmt.Sprintf("%s returned: %s\n", e.Tool, e.Summary)
	case "retry":
		return fmt.Sprintf("correcting the answer: %s\n", e.Feedback)
	}
	return e.Type + "\n"
}
