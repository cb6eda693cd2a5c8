package openai

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// Limits of OpenAI's Batch API on one batch.
const (
	// BatchMaxLines is the most requests one batch's input file may hold.
	BatchMaxLines = 50_000
	// BatchMaxBytes is the largest input file a batch takes (200 MB).
	BatchMaxBytes = 200 << 20
	// DefaultBatchWindow is the completion window asked for when
	// Config.Window is zero: OpenAI's "24h", the only one it offers.
	DefaultBatchWindow = 24 * time.Hour
)

// batchEndpoint is the endpoint of every line: chat completions.
const batchEndpoint = "/v1/chat/completions"

// tagKey is the metadata key of a batch's tag, for Find.
const tagKey = "batchagent_tag"

// maxJSONAnswer caps the answers of the Files and Batches endpoints other
// than file contents (a list page of 100 batches is far below it).
const maxJSONAnswer = 16 << 20

// Batch is a [batchmode.Provider] for OpenAI's Files and Batches API:
// a submission is uploaded as a JSONL file with purpose "batch", run as
// a batch of POST /v1/chat/completions requests, and its results read
// from the batch's output and error files. It is immutable after
// [NewBatch] and safe for concurrent use.
type Batch struct {
	m      *Model
	base   string // BaseURL without a trailing slash
	window time.Duration
}

var _ batchmode.Provider = (*Batch)(nil)

// NewBatch returns a Batch for cfg, which is read as [New] reads it
// (BaseURL, APIKey, Model, Flavor, HTTPClient, WrapTransport); cfg.Mode
// may be "" or "batch". It fails for a flavor without a batch API (vllm,
// sglang, llamacpp, ollama) and for a Window that is not a positive
// whole number of hours. It makes no request.
func NewBatch(cfg Config) (*Batch, error) {
	if cfg.Mode != "" && cfg.Mode != ModeBatch {
		return nil, fmt.Errorf("openai: unknown mode %q, want %q or none", cfg.Mode, ModeBatch)
	}
	switch cfg.Flavor {
	case FlavorVLLM, FlavorSGLang, FlavorLlamaCpp, FlavorOllama:
		return nil, fmt.Errorf("openai: flavor %q has no batch API", cfg.Flavor)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultBatchWindow
	}
	if cfg.Window < time.Hour || cfg.Window%time.Hour != 0 {
		return nil, fmt.Errorf("openai: Window %v: want a whole number of hours (OpenAI offers 24h)", cfg.Window)
	}
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Batch{m: m, base: strings.TrimSuffix(m.baseURL.String(), "/"), window: cfg.Window}, nil
}

// String describes b as [Model.String] does, never showing the API key.
func (b *Batch) String() string {
	return "openai.Batch(" + strings.TrimPrefix(b.m.String(), "openai.Model(")
}

// GoString is String, so that %#v shows no API key either.
func (b *Batch) GoString() string { return b.String() }

// Limits returns OpenAI's limits on one batch: 50,000 lines, 200 MB and
// the configured completion window.
func (b *Batch) Limits() batchmode.Limits {
	return batchmode.Limits{MaxLines: BatchMaxLines, MaxBytes: BatchMaxBytes, Window: b.window}
}

// Encode returns the JSONL line
// {"custom_id":id,"method":"POST","url":"/v1/chat/completions","body":BODY}
// where BODY is the non-streamed body [Model.Generate] sends for req.
func (b *Batch) Encode(id string, req *llm.Request) ([]byte, error) {
	body, err := b.m.body(req, false)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	idJSON, err := json.Marshal(id)
	if err != nil {
		return nil, b.m.errorf(0, llm.ErrBadRequest, "custom_id: %v", err)
	}
	line := make([]byte, 0, len(body)+len(idJSON)+80)
	line = append(line, `{"custom_id":`...)
	line = append(line, idJSON...)
	line = append(line, `,"method":"POST","url":"`+batchEndpoint+`","body":`...)
	line = append(line, body...)
	return append(line, '}'), nil
}

// Upload uploads lines, one JSONL line each, as a file named name with
// purpose "batch" (POST /v1/files) and returns its id.
func (b *Batch) Upload(ctx context.Context, name string, lines [][]byte) (string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		return "", b.m.errorf(0, llm.ErrBadRequest, "upload: %v", err)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", "application/jsonl")
	fw, err := mw.CreatePart(h)
	if err != nil {
		return "", b.m.errorf(0, llm.ErrBadRequest, "upload: %v", err)
	}
	for _, l := range lines {
		fw.Write(l) // a bytes.Buffer never fails
		fw.Write([]byte{'\n'})
	}
	if err := mw.Close(); err != nil {
		return "", b.m.errorf(0, llm.ErrBadRequest, "upload: %v", err)
	}
	var f struct {
		ID string `json:"id"`
	}
	if err := b.call(ctx, http.MethodPost, "files", &buf, mw.FormDataContentType(), &f); err != nil {
		return "", err
	}
	if f.ID == "" {
		return "", b.m.errorf(http.StatusOK, llm.ErrServer, "upload: answer has no file id")
	}
	return f.ID, nil
}

// Create creates the batch of the uploaded file fileID (POST
// /v1/batches) with the completion window of Limits and tag in its
// metadata, and returns its id. lines is not sent: the file holds them.
func (b *Batch) Create(ctx context.Context, fileID string, _ [][]byte, tag string) (string, error) {
	req, err := json.Marshal(map[string]any{
		"input_file_id":     fileID,
		"endpoint":          batchEndpoint,
		"completion_window": strconv.FormatInt(int64(b.window/time.Hour), 10) + "h",
		"metadata":          map[string]string{tagKey: tag},
	})
	if err != nil {
		return "", b.m.errorf(0, llm.ErrBadRequest, "create: %v", err)
	}
	var o batchObject
	if err := b.call(ctx, http.MethodPost, "batches", bytes.NewReader(req), "application/json", &o); err != nil {
		return "", err
	}
	if o.ID == "" {
		return "", b.m.errorf(http.StatusOK, llm.ErrServer, "create: answer has no batch id")
	}
	return o.ID, nil
}

// maxFindPages bounds the pages of batches Find reads.
const maxFindPages = 100

// Find returns the newest batch created at or after since (to the
// second, as OpenAI records it) from fileID with tag in its metadata,
// reading the list of batches (GET /v1/batches, newest first) until it
// reaches one created before since; "" when there is none.
func (b *Batch) Find(ctx context.Context, fileID, tag string, _ int, since time.Time) (string, error) {
	after := ""
	for range maxFindPages {
		path := "batches?limit=100"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		var page struct {
			Data    []batchObject `json:"data"`
			HasMore bool          `json:"has_more"`
		}
		if err := b.call(ctx, http.MethodGet, path, nil, "", &page); err != nil {
			return "", err
		}
		older := false
		for _, o := range page.Data {
			if o.CreatedAt < since.Unix() {
				older = true
				continue
			}
			if o.InputFileID == fileID && o.Metadata[tagKey] == tag {
				return o.ID, nil
			}
		}
		if !page.HasMore || older || len(page.Data) == 0 {
			return "", nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
	return "", nil
}

// batchObject is the part of OpenAI's Batch object the provider reads.
type batchObject struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	InputFileID  string `json:"input_file_id"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
	CreatedAt    int64  `json:"created_at"`
	Errors       *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Metadata map[string]string `json:"metadata"`
}

// Poll reads the batch (GET /v1/batches/{id}) and maps its status:
// validating, in_progress, finalizing and cancelling are Running;
// completed is Ended; expired Ended and Expired; cancelled Ended and
// Cancelled; failed is Failed with the errors' messages as Reason, and
// Retry when one's code is token_limit_exceeded.
func (b *Batch) Poll(ctx context.Context, batchID string) (batchmode.Status, error) {
	var o batchObject
	if err := b.call(ctx, http.MethodGet, "batches/"+url.PathEscape(batchID), nil, "", &o); err != nil {
		return batchmode.Status{}, err
	}
	st := batchmode.Status{
		OutputFile: o.OutputFileID, ErrorFile: o.ErrorFileID,
		Done:  o.RequestCounts.Completed + o.RequestCounts.Failed,
		Total: o.RequestCounts.Total,
	}
	switch o.Status {
	case "validating", "in_progress", "finalizing", "cancelling":
		st.State = batchmode.Running
	case "completed":
		st.State = batchmode.Ended
	case "expired":
		st.State, st.Expired = batchmode.Ended, true
	case "cancelled":
		st.State, st.Cancelled = batchmode.Ended, true
	case "failed":
		st.State = batchmode.Failed
		var reasons []string
		if o.Errors != nil {
			for _, e := range o.Errors.Data {
				if e.Code == "token_limit_exceeded" {
					st.Retry = true
				}
				r := e.Message
				if r == "" {
					r = e.Code
				}
				if e.Line != nil {
					r = fmt.Sprintf("line %d: %s", *e.Line, r)
				}
				reasons = append(reasons, r)
			}
		}
		st.Reason = b.m.scrub(truncate(strings.Join(reasons, "; ")))
		if st.Reason == "" {
			st.Reason = "batch failed without errors"
		}
	default:
		return batchmode.Status{}, b.m.errorf(http.StatusOK, llm.ErrServer, "batch %s: unknown status %q", batchID, truncate(o.Status))
	}
	return st, nil
}

// Results reads the output file, then the error file, of the ended
// batch (GET /v1/files/{id}/content) and yields each line's result: the
// chat completion of a line answered 200, decoded as [Model.Generate]
// decodes one; an *llm.APIError of the class Generate gives the line's
// status otherwise; an *llm.APIError wrapping [batchmode.ErrUnanswered]
// for a line that expired (batch_expired) or was cancelled
// (batch_cancelled). A malformed line yields a Result whose Err names the
// file and line (and whose ID is the line's custom_id when it can be
// read): it fails that line alone.
func (b *Batch) Results(ctx context.Context, _ string, st batchmode.Status, yield func(batchmode.Result) error) error {
	for _, id := range []string{st.OutputFile, st.ErrorFile} {
		if id == "" {
			continue
		}
		if err := b.readFile(ctx, id, yield); err != nil {
			return err
		}
	}
	return nil
}

// readFile yields the results of the lines of result file id.
func (b *Batch) readFile(ctx context.Context, id string, yield func(batchmode.Result) error) error {
	resp, err := b.do(ctx, http.MethodGet, "files/"+url.PathEscape(id)+"/content", nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if yerr := yield(b.parseLine(id, n, line)); yerr != nil {
				return yerr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return b.m.transportError(ctx, err)
		}
	}
}

// resultLine is one line of a batch's output or error file.
type resultLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseLine returns the result of line n of result file file.
func (b *Batch) parseLine(file string, n int, raw []byte) batchmode.Result {
	var l resultLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return batchmode.Result{ID: customID(raw), Err: b.m.errorf(0, llm.ErrServer, "batch file %s line %d: malformed: %v", file, n, err)}
	}
	res := batchmode.Result{ID: l.CustomID}
	switch {
	case l.CustomID == "":
		res.Err = b.m.errorf(0, llm.ErrServer, "batch file %s line %d: no custom_id", file, n)
	case l.Response != nil && l.Response.StatusCode == http.StatusOK:
		resp, err := b.m.decodeCompletion(http.StatusOK, l.Response.Body)
		if err != nil {
			res.Err = fmt.Errorf("batch file %s line %d: %w", file, n, err)
		} else {
			res.Resp = resp
		}
	case l.Response != nil && l.Response.StatusCode != 0:
		msg, typ, code := oaiwire.ParseError(l.Response.Body)
		if msg == "" {
			msg = http.StatusText(l.Response.StatusCode)
		}
		msg = truncate(msg)
		if l.Response.RequestID != "" {
			msg += " (request " + l.Response.RequestID + ")"
		}
		res.Err = &llm.APIError{Backend: b.m.name, StatusCode: l.Response.StatusCode, Message: b.m.scrub(msg),
			Err: classify(l.Response.StatusCode, typ, code, msg)}
	case l.Error != nil:
		msg := truncate(cmp.Or(l.Error.Message, l.Error.Code, "line failed"))
		class := classify(0, "", l.Error.Code, msg)
		if l.Error.Code == "batch_expired" || l.Error.Code == "batch_cancelled" {
			class = batchmode.ErrUnanswered
		}
		res.Err = &llm.APIError{Backend: b.m.name, Message: b.m.scrub(l.Error.Code + ": " + msg), Err: class}
	default:
		res.Err = b.m.errorf(0, llm.ErrServer, "batch file %s line %d: neither a response nor an error", file, n)
	}
	return res
}

// Cancel asks OpenAI to cancel the batch (POST /v1/batches/{id}/cancel).
func (b *Batch) Cancel(ctx context.Context, batchID string) error {
	return b.call(ctx, http.MethodPost, "batches/"+url.PathEscape(batchID)+"/cancel", nil, "", nil)
}

// Delete deletes the files (DELETE /v1/files/{id}); a file already gone
// (404) is no error, and an empty id is skipped. It tries every file and
// returns the errors of those it could not delete.
func (b *Batch) Delete(ctx context.Context, fileIDs ...string) error {
	var errs []error
	for _, id := range fileIDs {
		if id == "" {
			continue
		}
		err := b.call(ctx, http.MethodDelete, "files/"+url.PathEscape(id), nil, "", nil)
		if ae, ok := errors.AsType[*llm.APIError](err); ok && ae.StatusCode == http.StatusNotFound {
			err = nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// call sends a request and decodes its JSON answer into out, if not nil.
func (b *Batch) call(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	resp, err := b.do(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
	if err != nil {
		return b.m.transportError(ctx, err)
	}
	if out == nil {
		return nil
	}
	if len(data) > maxJSONAnswer {
		return b.m.errorf(resp.StatusCode, llm.ErrServer, "%s %s: answer over %d bytes", method, pathOnly(path), maxJSONAnswer)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return b.m.errorf(resp.StatusCode, llm.ErrServer, "%s %s: malformed answer: %v", method, pathOnly(path), err)
	}
	return nil
}

// pathOnly is path without its query, for errors.
func pathOnly(path string) string {
	p, _, _ := strings.Cut(path, "?")
	return "/" + p
}

// do sends a request to BaseURL/path with the API key. An HTTP error
// status is returned as the *llm.APIError the real-time client gives it
// (see statusError), a failure to send as transportError's.
func (b *Batch) do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.base+"/"+path, body)
	if err != nil {
		llm.HideURLs(err)
		return nil, b.m.errorf(0, llm.ErrBadRequest, "%v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if *b.m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+string(*b.m.apiKey))
	}
	resp, err := b.m.httpClient.Do(req)
	if err != nil {
		return nil, b.m.transportError(ctx, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, b.m.statusError(resp)
	}
	return resp, nil
}

// customID returns the top-level "custom_id" of a line that may be
// malformed after it, reading its tokens up to the first error; "" when
// none comes before.
func customID(raw []byte) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	depth := 0
	key := true // the next string at depth 1 is a key
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				depth++
			} else {
				depth--
			}
			if depth == 1 {
				key = true
			}
			continue
		case string:
			if depth == 1 && key && t == "custom_id" {
				if v, err := d.Token(); err == nil {
					s, _ := v.(string)
					return s
				}
				return ""
			}
		}
		if depth == 1 {
			key = !key
		}
	}
}
