package batchapi

import (
	"net/http"
	"time"

	"github.com/batchagent/batchagent/internal/oaiwire"
)

// apiError is an error answer in OpenAI's format:
// {"error":{"message","type","param","code"}}.
//
// Its body and headers are written by package oaiwire, as the gateway's
// are.
type apiError struct {
	status     int
	typ, code  string
	param      string // "" is written as null
	message    string
	retryAfter time.Duration // sent as Retry-After (whole seconds, rounded up) when > 0
	closeConn  bool          // the connection closes after the answer ("Connection: close")
}

func (e *apiError) Error() string { return e.message }

func badParam(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_value", param: param, message: msg}
}

var (
	errNotFound = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: "no such endpoint"}
	errShutdown = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", closeConn: true, retryAfter: time.Second, message: "the server is shutting down: try again, or another server"}
)

// writeError writes e as the answer.
func writeError(w http.ResponseWriter, e *apiError) {
	body := oaiwire.ErrorBody{Message: e.message, Type: e.typ, Param: e.param, Code: e.code}
	oaiwire.WriteError(w, e.status, body.AppendJSON(nil), e.retryAfter, e.closeConn)
}
