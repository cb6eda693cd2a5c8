package oaiwire

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batchagent/batchagent/jsonenc"
)

// ErrorBody is OpenAI's error answer:
// {"error":{"message","type","param","code"}}, param and code null when
// empty.
type ErrorBody struct {
	Message, Type, Param, Code string
}

// AppendJSON appends the error object, byte for byte as json.Marshal
// writes it.
func (e ErrorBody) AppendJSON(dst []byte) []byte {
	dst = jsonenc.AppendString(append(dst, `{"error":{"message":`...), e.Message, true)
	dst = jsonenc.AppendString(append(dst, `,"type":`...), e.Type, true)
	dst = append(dst, `,"param":`...)
	dst = appendNullable(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendNullable(dst, e.Code)
	return append(dst, "}}"...)
}

// appendNullable appends s as a JSON string, or null when it is empty.
func appendNullable(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return jsonenc.AppendString(dst, s, true)
}

// wireError is an error body in any of the shapes [ParseError] reads.
type wireError struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Detail  json.RawMessage `json:"detail"`
}

type wireErrorDetail struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// ParseError extracts the message, type and code of an error body in
// any of the shapes OpenAI-compatible servers send: {"error": {...}}
// (OpenAI, llama.cpp, Ollama), {"error": "text"}, {"object": "error",
// "message": ...} (vLLM, SGLang) and {"detail": ...} (FastAPI). A code
// that is a number comes back as its text. It falls back to the body's
// first line when the body is not JSON.
func ParseError(body []byte) (msg, typ, code string) {
	var w wireError
	if err := json.Unmarshal(body, &w); err != nil {
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return strings.TrimSpace(line), "", ""
	}
	msg, typ, code = w.Message, w.Type, rawString(w.Code)
	if len(w.Error) > 0 {
		var d wireErrorDetail
		var s string
		switch {
		case json.Unmarshal(w.Error, &d) == nil:
			msg, typ, code = d.Message, d.Type, rawString(d.Code)
		case json.Unmarshal(w.Error, &s) == nil:
			msg = s
		}
	}
	if msg == "" && len(w.Detail) > 0 {
		var s string
		if json.Unmarshal(w.Detail, &s) == nil {
			msg = s
		} else {
			msg = string(w.Detail)
		}
	}
	return msg, typ, code
}

// rawString returns a JSON string's value, or a scalar's text.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// WriteError answers with an error body (an [ErrorBody]'s JSON) and a
// newline, as JSON, with status; with Retry-After in whole seconds,
// rounded up, when retryAfter is positive, and "Connection: close" when
// closeConn is set.
func WriteError(w http.ResponseWriter, status int, body []byte, retryAfter time.Duration, closeConn bool) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if closeConn {
		h.Set("Connection", "close")
	}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10))
	}
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
