package batchapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// batchEndpoint is the endpoint batches target by default.
const batchEndpoint = "/v1/chat/completions"

// Endpoints are the endpoints a batch may target, as OpenAI's Batch API
// allows: each line's url must equal its batch's.
var Endpoints = []string{batchEndpoint, "/v1/embeddings", "/v1/completions"}

// fileObject is OpenAI's File object.
type fileObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

// batchObject is OpenAI's Batch object.
type batchObject struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *batchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    requestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	// Model is the model of the input's first line.
	Model string `json:"model,omitempty"`
	// Usage sums the usage of the lines that succeeded; set when the
	// batch ends.
	Usage *batchUsage `json:"usage,omitempty"`
}

// batchUsage is the Batch object's usage.
type batchUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type requestCounts struct {
	Total     int64 `json:"total"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
}

type batchErrors struct {
	Object string       `json:"object"`
	Data   []batchError `json:"data"`
}

// batchError is one entry of a failed batch's errors: what is wrong and
// on which line of the input file (1-based).
type batchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:]) // never fails
	return prefix + hex.EncodeToString(b[:])
}

func now() *int64 {
	t := time.Now().Unix()
	return &t
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}

func notFound(what, id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: fmt.Sprintf("no %s with id %q", what, id)}
}

// storeError answers a failure of the store: its details (paths of the
// server's disk) go to the log, not to the client.
func (s *Server) storeError(ctx context.Context, err error) *apiError {
	s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "batch store failed", slog.Any("err", err))
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", message: "the server's batch store failed; see its log"}
}

// getFile answers GET /v1/files/{id}.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, err := s.cfg.Store.getFile(r.Context(), id)
	if err != nil {
		writeError(w, s.lookupError(r.Context(), "file", id, err))
		return
	}
	writeJSON(w, f)
}

// deleteFile answers DELETE /v1/files/{id}.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cfg.Store.deleteFile(r.Context(), id); err != nil {
		if errors.Is(err, errFileInUse) {
			writeError(w, &apiError{status: http.StatusConflict, typ: "invalid_request_error", code: "file_in_use",
				message: fmt.Sprintf("file %s is the input of a batch not yet finished: cancel the batch or wait for it", id)})
			return
		}
		writeError(w, s.lookupError(r.Context(), "file", id, err))
		return
	}
	writeJSON(w, map[string]any{"id": id, "object": "file", "deleted": true})
}

// fileContent answers GET /v1/files/{id}/content.
func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.cfg.Store.getFile(r.Context(), id); err != nil {
		writeError(w, s.lookupError(r.Context(), "file", id, err))
		return
	}
	f, err := s.cfg.Store.openFile(id)
	if err != nil {
		writeError(w, s.storeError(r.Context(), err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	io.Copy(w, f)
}

// getBatch answers GET /v1/batches/{id}.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b, err := s.cfg.Store.getBatch(r.Context(), id)
	if err != nil {
		writeError(w, s.lookupError(r.Context(), "batch", id, err))
		return
	}
	writeJSON(w, b)
}

func (s *Server) lookupError(ctx context.Context, what, id string, err error) *apiError {
	if errors.Is(err, errNoRecord) {
		return notFound(what, id)
	}
	return s.storeError(ctx, err)
}

// list answers a list of files or batches: newest first, paged by after
// and limit (1 to 10,000; defaults to 20 for batches, 10,000 for files).
func (s *Server) list(w http.ResponseWriter, r *http.Request, table string) {
	owner := ownerOf(r)
	limit := 20
	if table == "files" {
		limit = 10_000
	}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 10_000 {
			writeError(w, badParam("limit", "limit must be an integer from 1 to 10000"))
			return
		}
		limit = n
	}
	data, more, err := s.cfg.Store.listPage(r.Context(), table, owner, r.URL.Query().Get("after"), limit)
	if err != nil {
		writeError(w, s.storeError(r.Context(), err))
		return
	}
	page := struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{Object: "list", Data: data, HasMore: more}
	if page.Data == nil {
		page.Data = []json.RawMessage{}
	}
	if len(data) > 0 {
		var first, last struct{ ID string }
		json.Unmarshal(data[0], &first)
		json.Unmarshal(data[len(data)-1], &last)
		page.FirstID, page.LastID = &first.ID, &last.ID
	}
	writeJSON(w, page)
}

// uploadFile stores the file of a multipart upload (fields "file" and
// "purpose"), streaming it to disk.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	owner := ownerOf(r)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, badParam("file", "want a multipart/form-data body with fields file and purpose: "+err.Error()))
		return
	}
	var purpose string
	var f *fileObject
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeError(w, badParam("file", "reading the multipart body: "+err.Error()))
			return
		}
		switch p.FormName() {
		case "purpose":
			b, _ := io.ReadAll(io.LimitReader(p, 64))
			purpose = string(b)
		case "file":
			if f != nil {
				writeError(w, badParam("file", "more than one file"))
				return
			}
			obj := fileObject{ID: newID("file-"), Object: "file", CreatedAt: time.Now().Unix(), Filename: p.FileName(), Purpose: "batch", Status: "processed"}
			got, err := s.cfg.Store.createFile(r.Context(), owner, obj, p, s.cfg.MaxBytes)
			if errors.Is(err, errTooLarge) {
				writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "file_too_large", param: "file",
					message: fmt.Sprintf("the file is larger than %d bytes", s.cfg.MaxBytes)})
				return
			}
			if err != nil {
				writeError(w, s.storeError(r.Context(), err))
				return
			}
			f = &got
		}
		p.Close()
	}
	if f == nil {
		writeError(w, badParam("file", "no file in the upload"))
		return
	}
	if purpose != "batch" {
		s.cfg.Store.deleteFile(r.Context(), f.ID)
		writeError(w, badParam("purpose", fmt.Sprintf("purpose %q is not supported (only batch)", purpose)))
		return
	}
	writeJSON(w, f)
}

// createBatch creates a batch and starts it.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	owner := ownerOf(r)
	var req struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large", message: "a batch's create request is at most 1 MiB"})
			return
		}
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: "request body is not valid JSON: " + err.Error()})
		return
	}
	if req.InputFileID == "" {
		writeError(w, badParam("input_file_id", "input_file_id is required"))
		return
	}
	if s.ctx.Err() != nil {
		// Shutting down: refuse before recording, or the batch would run
		// at the next start though the client was told it failed.
		writeError(w, errShutdown)
		return
	}
	if !slices.Contains(Endpoints, req.Endpoint) {
		writeError(w, badParam("endpoint", fmt.Sprintf("endpoint %q is not supported (only %s)", req.Endpoint, strings.Join(Endpoints, ", "))))
		return
	}
	if req.CompletionWindow != "24h" {
		writeError(w, badParam("completion_window", "completion_window must be 24h"))
		return
	}
	if len(req.Metadata) > 16 {
		writeError(w, badParam("metadata", "metadata has at most 16 pairs"))
		return
	}
	if mine, err := s.cfg.Store.owns(r.Context(), "files", req.InputFileID, owner); err != nil || !mine {
		if err == nil {
			err = errNoRecord
		}
		writeError(w, s.lookupError(r.Context(), "file", req.InputFileID, err))
		return
	}
	f, err := s.cfg.Store.getFile(r.Context(), req.InputFileID)
	if err != nil {
		writeError(w, s.lookupError(r.Context(), "file", req.InputFileID, err))
		return
	}
	if f.Purpose != "batch" {
		writeError(w, badParam("input_file_id", "the input file's purpose must be batch"))
		return
	}
	created := time.Now()
	expires := created.Add(s.cfg.Window).Unix()
	b := batchObject{
		ID: newID("batch_"), Object: "batch", Endpoint: req.Endpoint, InputFileID: req.InputFileID,
		CompletionWindow: req.CompletionWindow, Status: "validating", CreatedAt: created.Unix(),
		ExpiresAt: &expires, Metadata: req.Metadata,
	}
	if err := s.cfg.Store.createBatch(r.Context(), owner, b); err != nil {
		writeError(w, s.storeError(r.Context(), err))
		return
	}
	if !s.startBatch(b.ID) {
		writeError(w, errShutdown)
		return
	}
	writeJSON(w, b)
}

// cancelBatch moves a batch to cancelling; its runner stops admitting
// lines, lets those in flight finish, and ends it cancelled.
func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var bad string
	b, err := s.cfg.Store.updateBatch(r.Context(), id, func(b *batchObject) bool {
		switch b.Status {
		case "validating", "in_progress":
			b.Status, b.CancellingAt = "cancelling", now()
			return true
		case "cancelling", "cancelled":
			return false
		}
		bad = b.Status
		return false
	})
	if err != nil {
		writeError(w, s.lookupError(r.Context(), "batch", id, err))
		return
	}
	if bad != "" {
		writeError(w, &apiError{status: http.StatusConflict, typ: "invalid_request_error", code: "invalid_state",
			message: fmt.Sprintf("cannot cancel a batch with status %s", bad)})
		return
	}
	s.mu.Lock()
	if run, ok := s.runners[id]; ok {
		run.requestCancel()
	}
	s.mu.Unlock()
	s.cfg.Logger.LogAttrs(r.Context(), slog.LevelDebug, "batch cancelled", slog.String("batch", id))
	writeJSON(w, b)
}

// resume starts a runner for each unfinished batch of the store.
func (s *Server) resume(ctx context.Context) error {
	ids, err := s.cfg.Store.unfinished(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		s.startBatch(id)
	}
	return nil
}
