package server

import (
	"log/slog"
	"net/http"
	"time"
)

// An apiCall is one API request (a chat completion, a response, a
// forwarded embeddings or completions call) as its handler sees it: the
// key it came with, and what the debug line written at its end says (the
// model asked for, the status answered).
type apiCall struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	what   string // the log's message
	start  time.Time
	reqID  string
	client *client // nil: the server has no keys
	// keyName, model and status are the end's log line.
	keyName string
	model   string
	status  int

	entered bool   // s.enter succeeded: end leaves
	release func() // the key's admission; nil: none taken
}

// begin opens an API request named what in the log: it enters the server
// (refused while it drains), authenticates the key and admits the call
// under the key's limits. ok is false when the request was refused and
// answered. end must be deferred either way.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, what string) (c *apiCall, ok bool) {
	c = &apiCall{s: s, w: w, r: r, what: what, start: time.Now(), reqID: requestIDFrom(r.Context()), status: http.StatusOK}
	if !s.enter() {
		c.refuse(errShutdown)
		return c, false
	}
	c.entered = true
	cl, ok := s.authenticate(r)
	if !ok {
		c.refuse(errAuth)
		return c, false
	}
	c.client = cl
	if cl != nil {
		c.keyName = cl.name
	}
	release, e := cl.admit(time.Now())
	if e != nil {
		c.refuse(e)
		return c, false
	}
	c.release = release
	return c, true
}

// refuse answers the request with e.
func (c *apiCall) refuse(e *apiError) {
	c.status = e.status
	writeError(c.w, e)
}

// failed logs err, the whole cause (which the client's message leaves
// out), and records status, the request's answer.
func (c *apiCall) failed(err error, status int) {
	c.status = status
	c.s.cfg.Logger.LogAttrs(c.r.Context(), slog.LevelWarn, c.what+" failed",
		slog.String("request_id", c.reqID), slog.String("model", c.model), slog.String("key", c.keyName), slog.Int("status", c.status),
		slog.String("code", errorOf(err).code), slog.String("err", err.Error()))
}

// end releases what begin took and writes the request's debug line.
func (c *apiCall) end() {
	if c.release != nil {
		c.release()
	}
	if c.entered {
		c.s.leave()
	}
	c.s.cfg.Logger.LogAttrs(c.r.Context(), slog.LevelDebug, c.what,
		slog.String("request_id", c.reqID), slog.String("model", c.model), slog.Int("status", c.status), slog.String("key", c.keyName),
		slog.Duration("took", time.Since(c.start)))
}
