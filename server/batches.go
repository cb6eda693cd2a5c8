package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/server/batchapi"
)

// lineWriter is the http.ResponseWriter of a batch line's executor: it
// keeps the status and the body.
type lineWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *lineWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *lineWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// execLine, the [batchapi.ExecFunc] of the server's batches, answers one
// chat-completions body as POST /v1/chat/completions would (never
// streamed), in the batch class, under the request id reqID: its status,
// its JSON body and the failure the body tells of (nil on success; the
// whole cause, for the log).
func (s *Server) execLine(ctx context.Context, reqID string, body json.RawMessage) (int, json.RawMessage, error) {
	refuse := func(e *apiError) (int, json.RawMessage, error) { return e.status, e.body(reqID), e }
	if p := batchapi.EndpointFrom(ctx); p != "/v1/chat/completions" {
		return s.execForwardLine(ctx, s.clientByOwner(batchapi.OwnerFrom(ctx)), reqID, p, body)
	}
	var cr oaiwire.Request
	if je := oaiwire.CheckJSON(body); je != nil {
		return refuse(&apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", param: je.Param(), message: "body: " + je.Error()})
	}
	if err := json.Unmarshal(body, &cr); err != nil {
		return refuse(&apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: "body is not a valid chat completions request: " + err.Error()})
	}
	if err := cr.ReadExtra(body); err != nil {
		return refuse(&apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: "body is not a JSON object: " + err.Error()})
	}
	cr.Stream, cr.StreamOptions = false, nil
	m, input, e := s.modeFor(&cr, batchagent.Batch)
	if e != nil {
		return refuse(e)
	}
	// The line runs as its batch's key's, under that key's spend cap; a
	// key over it will not have room later: the line's answer is final.
	if m, e = s.withCap(s.clientByOwner(batchapi.OwnerFrom(ctx)), m, cr.Model); e != nil {
		status, body, err := refuse(e)
		if e.code == "budget_exceeded" {
			err = fmt.Errorf("%w: %w", batchapi.ErrFinal, err)
		}
		return status, body, err
	}
	// No RequestTimeout: a batch line may wait long for a slot below
	// interactive traffic; the batch's completion window bounds it.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &lineWriter{}
	w.Header().Set(requestIDHeader, reqID)
	x := &executor{
		w: w, cancel: cancel, id: requestID(), model: cr.Model, created: time.Now().Unix(),
		input: input, tracer: s.cfg.Tracer, recorder: s.cfg.Recorder,
	}
	if p, ok := s.cfg.Prices[cr.Model]; ok {
		x.price = &p
	}
	err := x.execute(ctx, m)
	if err != nil && errorOf(err).code == "budget_exceeded" {
		err = fmt.Errorf("%w: %w", batchapi.ErrFinal, err)
	}
	if w.status == 0 {
		return refuse(&apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", message: "no answer"})
	}
	return w.status, json.RawMessage(bytes.TrimSpace(w.body.Bytes())), err
}

// batchSpec returns spec in the batch class: spec itself when it is.
func batchSpec(spec *batchagent.Spec) (*batchagent.Spec, error) {
	if spec.Priority() == batchagent.Batch {
		return spec, nil
	}
	def := spec.Def()
	def.Priority = batchagent.Batch
	return batchagent.NewSpec(def)
}
