package batchapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// apiError is an error answer in OpenAI's format:
// {"error":{"message","type","param","code"}}.
//
// It repeats the gateway's own (server/wire.go) until one OpenAI wire
// package holds the error body for both.
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
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.closeConn {
		h.Set("Connection", "close")
	}
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.retryAfter+time.Second-1)/time.Second), 10))
	}
	w.WriteHeader(e.status)
	var b struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	b.Error.Message, b.Error.Type = e.message, e.typ
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	out, _ := json.Marshal(b) // strings only: cannot fail
	w.Write(append(out, '\n'))
}
