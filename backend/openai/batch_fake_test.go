package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeBatchAPI is an httptest server implementing OpenAI's Files and
// Batches API as documented: POST /v1/files (multipart, purpose batch),
// GET /v1/files/{id}/content, DELETE /v1/files/{id}, POST /v1/batches,
// GET /v1/batches/{id}, GET /v1/batches (newest first, limit and after),
// POST /v1/batches/{id}/cancel. A batch moves one status per GET of it:
// validating → in_progress → finalizing → completed (or failed when its
// input does not validate, or cancelling → cancelled after a cancel);
// outcome decides each line's result when the batch ends.
type fakeBatchAPI struct {
	t   *testing.T
	srv *httptest.Server
	key string

	mu      sync.Mutex
	seq     int
	files   map[string][]byte
	batches map[string]*fakeBatch
	order   []string // batch ids, oldest first
	// outcome returns what becomes of a line: "ok", "400" or "500" (in the
	// output file), "error_file" (a 400 in the error file), "unanswered"
	// (the batch ends without it, expired), "garbage" (a malformed output
	// line). Nil means "ok".
	outcome func(customID string) string
	// failWith makes every batch fail at validation with this error
	// code ("token_limit_exceeded"); empty: validate the lines.
	failWith string
	// loseCreate: the next create records the batch and answers 500.
	loseCreate bool
	// pageMax caps a list page below its limit, to test paging.
	pageMax int
	// rateLimited: the next request is answered 429 with headers.
	rateLimited bool
}

type fakeBatch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	Errors           any               `json:"errors"`
	RequestCounts    map[string]int    `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	cancel           bool
}

func newFakeBatchAPI(t *testing.T) *fakeBatchAPI {
	f := &fakeBatchAPI{t: t, key: "sk-fake-secret", files: map[string][]byte{}, batches: map[string]*fakeBatch{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/files", f.upload)
	mux.HandleFunc("GET /v1/files/{id}/content", f.content)
	mux.HandleFunc("DELETE /v1/files/{id}", f.deleteFile)
	mux.HandleFunc("POST /v1/batches", f.create)
	mux.HandleFunc("GET /v1/batches", f.list)
	mux.HandleFunc("GET /v1/batches/{id}", f.get)
	mux.HandleFunc("POST /v1/batches/{id}/cancel", f.cancelBatch)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.key {
			f.fail(w, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
			return
		}
		f.mu.Lock()
		limited := f.rateLimited
		f.rateLimited = false
		f.mu.Unlock()
		if limited {
			w.Header().Set("Retry-After", "3")
			w.Header().Set("x-ratelimit-limit-requests", "500")
			w.Header().Set("x-ratelimit-remaining-requests", "0")
			f.fail(w, 429, "requests", "rate_limit_exceeded", "Rate limit reached")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeBatchAPI) fail(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":%q}}`, msg, typ, code)
}

func (f *fakeBatchAPI) newID(prefix string) string {
	f.seq++
	return prefix + strconv.Itoa(f.seq)
}

func (f *fakeBatchAPI) upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		f.fail(w, 400, "invalid_request_error", "", err.Error())
		return
	}
	if r.FormValue("purpose") != "batch" {
		f.fail(w, 400, "invalid_request_error", "", "purpose must be batch")
		return
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		f.fail(w, 400, "invalid_request_error", "", "no file")
		return
	}
	data, _ := io.ReadAll(file)
	f.mu.Lock()
	id := f.newID("file-")
	f.files[id] = data
	f.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "file", "bytes": len(data), "created_at": time.Now().Unix(),
		"filename": hdr.Filename, "purpose": "batch"})
}

func (f *fakeBatchAPI) content(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	data, ok := f.files[r.PathValue("id")]
	f.mu.Unlock()
	if !ok {
		f.fail(w, 404, "invalid_request_error", "", "No such File object: "+r.PathValue("id"))
		return
	}
	w.Write(data)
}

func (f *fakeBatchAPI) deleteFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	_, ok := f.files[id]
	delete(f.files, id)
	f.mu.Unlock()
	if !ok {
		f.fail(w, 404, "invalid_request_error", "", "No such File object: "+id)
		return
	}
	fmt.Fprintf(w, `{"id":%q,"object":"file","deleted":true}`, id)
}

func (f *fakeBatchAPI) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.fail(w, 400, "invalid_request_error", "", err.Error())
		return
	}
	if req.Endpoint != "/v1/chat/completions" || req.CompletionWindow != "24h" {
		f.fail(w, 400, "invalid_request_error", "", "bad endpoint or completion_window")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[req.InputFileID]; !ok {
		f.fail(w, 404, "invalid_request_error", "", "No such File object")
		return
	}
	b := &fakeBatch{ID: f.newID("batch_"), Object: "batch", Endpoint: req.Endpoint, InputFileID: req.InputFileID,
		CompletionWindow: req.CompletionWindow, Status: "validating", CreatedAt: time.Now().Unix(),
		RequestCounts: map[string]int{"total": 0, "completed": 0, "failed": 0}, Metadata: req.Metadata}
	f.batches[b.ID] = b
	f.order = append(f.order, b.ID)
	if f.loseCreate {
		f.loseCreate = false
		f.fail(w, 500, "server_error", "", "The server had an error while processing your request")
		return
	}
	json.NewEncoder(w).Encode(b)
}

func (f *fakeBatchAPI) list(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit < 1 || limit > 100 {
		limit = 20
	}
	if f.pageMax > 0 {
		limit = min(limit, f.pageMax)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := slices.Clone(f.order)
	slices.Reverse(ids)
	if after := r.URL.Query().Get("after"); after != "" {
		i := slices.Index(ids, after)
		ids = ids[i+1:]
	}
	more := len(ids) > limit
	ids = ids[:min(limit, len(ids))]
	data := []*fakeBatch{}
	for _, id := range ids {
		data = append(data, f.batches[id])
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "has_more": more})
}

func (f *fakeBatchAPI) cancelBatch(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.batches[r.PathValue("id")]
	if !ok {
		f.fail(w, 404, "invalid_request_error", "", "No such Batch object")
		return
	}
	b.Status, b.cancel = "cancelling", true
	json.NewEncoder(w).Encode(b)
}

// get answers the batch, then moves it one status on.
func (f *fakeBatchAPI) get(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.batches[r.PathValue("id")]
	if !ok {
		f.fail(w, 404, "invalid_request_error", "", "No such Batch object")
		return
	}
	json.NewEncoder(w).Encode(b)
	f.advance(b)
}

type fakeLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

func (f *fakeBatchAPI) lines(b *fakeBatch) []fakeLine {
	var out []fakeLine
	for raw := range bytes.SplitSeq(bytes.TrimSpace(f.files[b.InputFileID]), []byte("\n")) {
		var l fakeLine
		if err := json.Unmarshal(raw, &l); err != nil {
			f.t.Errorf("fake: input line %q: %v", raw, err)
		}
		out = append(out, l)
	}
	return out
}

func (f *fakeBatchAPI) advance(b *fakeBatch) {
	switch b.Status {
	case "validating":
		if f.failWith != "" {
			b.Status = "failed"
			b.Errors = map[string]any{"object": "list", "data": []map[string]any{{"code": f.failWith, "message": "Enqueued token limit reached for gpt-4.1-mini in organization org-x.", "param": nil, "line": nil}}}
			return
		}
		for i, l := range f.lines(b) {
			if l.Method != "POST" || l.URL != "/v1/chat/completions" || !json.Valid(l.Body) || l.CustomID == "" {
				b.Status = "failed"
				b.Errors = map[string]any{"object": "list", "data": []map[string]any{{"code": "invalid_request", "message": "invalid line", "line": i + 1}}}
				return
			}
		}
		b.Status = "in_progress"
		b.RequestCounts["total"] = len(f.lines(b))
	case "in_progress":
		b.Status = "finalizing"
	case "finalizing", "cancelling":
		f.finish(b)
	}
}

// finish writes the batch's output and error files and ends it.
func (f *fakeBatchAPI) finish(b *fakeBatch) {
	var out, errs bytes.Buffer
	final := "completed"
	if b.cancel {
		final = "cancelled"
	}
	for i, l := range f.lines(b) {
		outcome := "ok"
		if f.outcome != nil {
			outcome = f.outcome(l.CustomID)
		}
		if b.cancel {
			outcome = "cancelled"
		}
		reqID := fmt.Sprintf("batch_req_%d", i)
		switch outcome {
		case "ok":
			var body struct {
				Model string `json:"model"`
			}
			json.Unmarshal(l.Body, &body)
			fmt.Fprintf(&out, `{"id":%q,"custom_id":%q,"response":{"status_code":200,"request_id":"req_%d","body":{"id":"chatcmpl-%d","object":"chat.completion","created":1711471533,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"answer to %s","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":22,"completion_tokens":5,"total_tokens":27,"prompt_tokens_details":{"cached_tokens":16,"audio_tokens":0}}}},"error":null}`+"\n",
				reqID, l.CustomID, i, i, body.Model, l.CustomID)
			b.RequestCounts["completed"]++
		case "tool":
			fmt.Fprintf(&out, `{"id":%q,"custom_id":%q,"response":{"status_code":200,"request_id":"req_%d","body":{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}},"error":null}`+"\n",
				reqID, l.CustomID, i)
			b.RequestCounts["completed"]++
		case "400", "500":
			code, _ := strconv.Atoi(outcome)
			fmt.Fprintf(&out, `{"id":%q,"custom_id":%q,"response":{"status_code":%d,"request_id":"req_%d","body":{"error":{"message":"line failed with %d","type":"invalid_request_error","param":null,"code":null}}},"error":null}`+"\n",
				reqID, l.CustomID, code, i, code)
			b.RequestCounts["failed"]++
		case "context":
			fmt.Fprintf(&errs, `{"id":%q,"custom_id":%q,"response":{"status_code":400,"request_id":"req_%d","body":{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}},"error":null}`+"\n",
				reqID, l.CustomID, i)
			b.RequestCounts["failed"]++
		case "garbage":
			fmt.Fprintf(&out, `{"id":%q,"custom_id":%q,"response":{"status_code":200,"body":{"choices":`+"\n", reqID, l.CustomID)
		case "unanswered":
			final = "expired"
			fmt.Fprintf(&errs, `{"id":%q,"custom_id":%q,"response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}`+"\n", reqID, l.CustomID)
		case "cancelled":
			fmt.Fprintf(&errs, `{"id":%q,"custom_id":%q,"response":null,"error":{"code":"batch_cancelled","message":"This request was not executed because the batch was cancelled."}}`+"\n", reqID, l.CustomID)
		default:
			f.t.Errorf("fake: unknown outcome %q", outcome)
		}
	}
	if out.Len() > 0 {
		id := f.newID("file-out-")
		f.files[id] = out.Bytes()
		b.OutputFileID = &id
	}
	if errs.Len() > 0 {
		id := f.newID("file-err-")
		f.files[id] = errs.Bytes()
		b.ErrorFileID = &id
	}
	b.Status = final
}

// fileCount returns the number of files the fake holds.
func (f *fakeBatchAPI) fileCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.files)
}

// hasFile reports whether the fake holds file id.
func (f *fakeBatchAPI) hasFile(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.files[id]
	return ok
}
