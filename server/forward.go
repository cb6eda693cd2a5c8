package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/llm"
)

// forwardBody is what the gateway reads of the body of a forwarded
// endpoint (/v1/embeddings, /v1/completions); the body itself is sent
// on verbatim, its model renamed to the backend's.
type forwardBody struct {
	Model     string          `json:"model"`
	Stream    bool            `json:"stream"`
	MaxTokens *int            `json:"max_tokens"`
	Input     json.RawMessage `json:"input"`  // embeddings
	Prompt    json.RawMessage `json:"prompt"` // completions
}

// forwardCall is one prepared call of a forwarded endpoint.
type forwardCall struct {
	path  string
	model string // the name the client asked for
	fb    forwardBody
	fwd   llm.Forwarder
	body  []byte // what goes upstream
	// settle ends the call's spend-cap reservation with its usage (nil:
	// no cap).
	settle func(u llm.Usage, answered bool)
}

// prepareForward checks body, a request of path from client c, and
// returns its call, or the error to answer: 400 for a body that is not a
// JSON object or has no model, for an agent, and for a backend that does
// not serve path (naming it); 404 for an unknown model; the spend cap's
// refusals. batch says the call is a batch line's: never streamed.
func (s *Server) prepareForward(ctx context.Context, c *client, path string, body []byte, batch bool) (*forwardCall, *apiError) {
	if je := oaiwire.CheckJSON(body); je != nil {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", param: je.Param(), message: "request body: " + je.Error()}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: fmt.Sprintf("request body is not a %s request: %v", path, err)}
	}
	x := &forwardCall{path: path}
	if err := json.Unmarshal(body, &x.fb); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: fmt.Sprintf("request body is not a %s request: %v", path, err)}
	}
	x.model = x.fb.Model
	if x.model == "" {
		return nil, badParam("model", "model is required")
	}
	if strings.HasPrefix(x.model, AgentPrefix) {
		if _, ok := s.cfg.Agents[strings.TrimPrefix(x.model, AgentPrefix)]; !ok {
			return nil, unknownModel(x.model)
		}
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_endpoint", param: "model",
			message: fmt.Sprintf("%s is not served for agents: the agent %q answers /v1/chat/completions and /v1/responses", path, x.model)}
	}
	b, ok := s.cfg.Backends[x.model]
	if !ok {
		return nil, unknownModel(x.model)
	}
	if x.fwd, ok = b.Model.(llm.Forwarder); !ok {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_endpoint", param: "model",
			message: fmt.Sprintf("the model %q does not serve %s: its backend (%T) is not OpenAI-compatible; ask for a model of an OpenAI-compatible backend or the simulator", x.model, path, b.Model)}
	}
	if x.fb.MaxTokens != nil && *x.fb.MaxTokens < 0 {
		return nil, badParam("max_tokens", "max_tokens must not be negative")
	}
	// The body goes on verbatim but for its model (the backend's name for
	// it) and, in a batch, its stream.
	x.body = body
	rename := b.Name != "" && b.Name != x.model
	_, streams := fields["stream"]
	if rename || (batch && streams) {
		if rename {
			fields["model"], _ = json.Marshal(b.Name)
		}
		if batch {
			delete(fields, "stream")
			delete(fields, "stream_options")
			x.fb.Stream = false
		}
		var err error
		if x.body, err = json.Marshal(fields); err != nil {
			return nil, badParam("", "request body: "+err.Error())
		}
	}
	if c == nil || c.cap == nil {
		return x, nil
	}
	if e := overBudget(c); e != nil {
		return nil, e
	}
	p, e := s.capPrice(x.model, b.Name)
	if e != nil {
		return nil, e
	}
	worst := x.worst(p)
	if err := c.cap.Reserve(ctx, worst); err != nil {
		if errors.Is(err, spend.ErrCapReached) {
			return nil, budgetExceeded(c)
		}
		return nil, errorOf(err)
	}
	x.settle = func(u llm.Usage, answered bool) {
		cost := 0.0
		switch {
		case u.PromptTokens+u.CompletionTokens > 0:
			cost = p.Cost(u)
		case answered:
			cost = worst
		}
		c.cap.Settle(worst, cost)
	}
	return x, nil
}

// worst returns the most x can cost at p: see embeddingsWorst and
// completionsWorst.
func (x *forwardCall) worst(p llm.Price) float64 {
	if x.path == "/v1/embeddings" {
		return embeddingsWorst(x.fb.Input, p)
	}
	return completionsWorst(x.fb.Prompt, x.fb.MaxTokens, p)
}

// forwardUsage reads the usage an answer of a forwarded endpoint reports.
func forwardUsage(b []byte) (llm.Usage, bool) {
	var v struct {
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return llm.Usage{}, false
	}
	return llm.Usage{PromptTokens: v.Usage.PromptTokens, CompletionTokens: v.Usage.CompletionTokens}, true
}

// forwardHandler answers POST path (/v1/embeddings, /v1/completions) by
// forwarding it to the model's backend, with the key's authentication,
// limits and spend cap, and the server's drain, metrics and log.
func (s *Server) forwardHandler(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call, ok := s.begin(w, r, path)
		defer call.end()
		if !ok {
			return
		}
		start, c := call.start, call.client
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			call.refuse(s.bodyError(err))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		x, e := s.prepareForward(ctx, c, path, body, false)
		if e != nil {
			call.refuse(e)
			return
		}
		call.model = x.model
		var (
			usage    llm.Usage
			answered bool
			ttft     time.Duration
		)
		end := func(string, llm.Usage, error) {}
		if s.cfg.Tracer != nil {
			ctx, end = s.cfg.Tracer.Request(ctx, x.model, "")
		}
		err = s.forwardTo(ctx, w, x, start, &usage, &answered, &ttft)
		if x.settle != nil {
			x.settle(usage, answered)
		}
		end("", usage, err)
		if s.cfg.Recorder != nil {
			s.cfg.Recorder.Call(x.model, ttft, time.Since(start), usage, err)
		}
		if err != nil {
			call.failed(err, errorOf(err).status)
		}
	}
}

// forwardTo makes x's call and writes its answer to w: a JSON answer
// whole, a stream event by event, each flushed. It reports the usage the
// answer tells, whether one came, and the time to its first byte. Its
// error is the call's (written to w when nothing else was) or the
// stream's cut.
func (s *Server) forwardTo(ctx context.Context, w http.ResponseWriter, x *forwardCall, start time.Time, usage *llm.Usage, answered *bool, ttft *time.Duration) error {
	resp, err := x.fwd.Forward(ctx, x.path, x.body)
	if err != nil {
		writeError(w, errorOf(err))
		return err
	}
	defer resp.Body.Close()
	*ttft = time.Since(start)
	h := w.Header()
	h.Set("Content-Type", resp.Header.Get("Content-Type"))
	if !x.fb.Stream || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			e := &apiError{status: http.StatusBadGateway, typ: "server_error", code: "backend_unreachable", logged: true, message: "the backend's answer was cut"}
			writeError(w, e)
			return fmt.Errorf("%w: %w", e, err)
		}
		*answered = true
		*usage, _ = forwardUsage(b)
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
		return nil
	}
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(data, []byte(`"usage"`)) {
				if u, ok := forwardUsage(data); ok {
					*usage = u
				}
			}
			if bytes.Equal(bytes.TrimSpace(line), []byte("data: [DONE]")) {
				*answered = true
			}
			if _, werr := w.Write(line); werr != nil {
				return errClientGone
			}
			if len(bytes.TrimSpace(line)) == 0 {
				rc.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			rc.Flush()
			return nil
		}
		if err != nil {
			// Cut mid-stream: an error event, no [DONE].
			e := &apiError{status: http.StatusBadGateway, typ: "server_error", code: "backend_unreachable", logged: true, message: "the backend's stream was cut"}
			fmt.Fprintf(w, "data: %s\n\n", e.body(h.Get(requestIDHeader)))
			rc.Flush()
			return fmt.Errorf("%w: %w", e, err)
		}
	}
}

// execForwardLine answers a batch line of path (/v1/embeddings,
// /v1/completions) as POST path would, never streamed: see execLine.
func (s *Server) execForwardLine(ctx context.Context, c *client, reqID, path string, body []byte) (int, json.RawMessage, error) {
	x, e := s.prepareForward(ctx, c, path, body, true)
	if e != nil {
		return e.status, e.body(reqID), e
	}
	w := &lineWriter{}
	w.Header().Set(requestIDHeader, reqID)
	start := time.Now()
	var (
		usage    llm.Usage
		answered bool
		ttft     time.Duration
	)
	err := s.forwardTo(ctx, w, x, start, &usage, &answered, &ttft)
	if x.settle != nil {
		x.settle(usage, answered)
	}
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.Call(x.model, ttft, time.Since(start), usage, err)
	}
	return w.status, json.RawMessage(bytes.TrimSpace(w.body.Bytes())), err
}
