package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/batchapi"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/server"
)

// batchFlags are the flags of `batchagent run --openai-batch`.
type batchFlags struct {
	input   string // the requests file
	out     string // the results file
	backend string // backend URL for every model the requests name
	config  string // or a serve config: its backends and agents
	state   string // the store's directory; default OUT.batch
	quiet   bool
}

// runOpenAIBatch runs a file in OpenAI's batch input format through the
// gateway's Batch API in-process (no listener), and writes every line's
// result to f.out in input order: output lines and error lines, OpenAI's
// format, each custom_id once. Its store (f.state) makes it resumable: run
// again with the same input, it continues the batch, keeping the lines
// done.
func runOpenAIBatch(ctx context.Context, f batchFlags, logger *slog.Logger, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "batchagent run --openai-batch: "+format+"\n", args...)
		return code
	}
	if f.out == "" || f.out == "-" {
		return fail(exitUsage, "--out FILE is required")
	}
	reads := []runFile{{object: "the --openai-batch file", path: f.input}, {object: "the --config file", path: f.config}}
	if err := checkRunFiles([]runFile{outputFile(f.out, true)}, reads); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if (f.backend == "") == (f.config == "") {
		return fail(exitUsage, "give --backend URL or --config serve.yaml (not both)")
	}
	sum, models, err := scanBatchInput(f.input)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if f.state == "" {
		f.state = f.out + ".batch"
	}
	// One run per state directory and output: a second would run the same
	// lines again and write the same file.
	if err := os.MkdirAll(f.state, 0o755); err != nil {
		return fail(exitFailed, "--state: %v", err)
	}
	holder := fmt.Sprintf("pid %d: batchagent run --openai-batch %s → %s", os.Getpid(), f.input, f.out)
	for _, t := range []struct{ path, what string }{{filepath.Join(f.state, "batches.db"), "state directory"}, {f.out, "output"}} {
		if fi, err := os.Stat(t.path); err == nil && !fi.Mode().IsRegular() {
			continue // a device or a pipe: nothing to guard, and no room for a sidecar
		}
		lock, err := lockFile(t.path, t.what, holder)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		defer lock.Close()
	}
	store, err := batchapi.Open(f.state)
	if err != nil {
		return fail(exitFailed, "--state: %v", err)
	}
	defer store.Close()

	var srv *server.Server
	if f.config != "" {
		sc, err := config.LoadServe(f.config)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		g, err := openGateway(ctx, sc, store, logger, environ)
		if err != nil {
			return fail(exitUsage, "%s: %v", f.config, err)
		}
		defer g.close()
		srv = g.srv
	} else {
		backends := map[string]batchagent.Backend{}
		for _, m := range models {
			if strings.HasPrefix(m, server.AgentPrefix) {
				return fail(exitUsage, "model %q: agents need --config", m)
			}
			model, err := openBackend(ctx, f.backend, m, "", environ)
			if err != nil {
				return fail(exitUsage, "%v", err)
			}
			backends[m] = batchagent.Backend{Model: model, Name: m}
		}
		engine, err := batchagent.New(batchagent.Config{Logger: logger})
		if err != nil {
			return fail(exitFailed, "%v", err)
		}
		if srv, err = server.New(server.Config{Engine: engine, Backends: backends, Batches: store, Logger: logger}); err != nil {
			return fail(exitFailed, "%v", err)
		}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		srv.Shutdown(sctx)
	}()

	b, err := findOrCreateBatch(ctx, srv, f.input, sum)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	last := ""
	for !slices.Contains([]string{"completed", "failed", "expired", "cancelled"}, b.Status) {
		if !f.quiet {
			if p := fmt.Sprintf("%s: %d/%d done, %d failed", b.Status, b.RequestCounts.Completed+b.RequestCounts.Failed, b.RequestCounts.Total, b.RequestCounts.Failed); p != last {
				fmt.Fprintf(stderr, "\rbatch %s %s", b.ID, p)
				last = p
			}
		}
		select {
		case <-ctx.Done():
			if !f.quiet {
				fmt.Fprintln(stderr)
			}
			fmt.Fprintf(stderr, "batchagent run --openai-batch: interrupted; run again to resume (state in %s)\n", f.state)
			return exitInterrupted
		case <-time.After(100 * time.Millisecond):
		}
		if err := callJSON(srv, http.MethodGet, "/v1/batches/"+b.ID, "", nil, &b); err != nil {
			return fail(exitFailed, "%v", err)
		}
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "\rbatch %s %s: %d completed, %d failed of %d\n", b.ID, b.Status, b.RequestCounts.Completed, b.RequestCounts.Failed, b.RequestCounts.Total)
	}
	if b.Status == "failed" {
		for _, e := range b.Errors.Data {
			fmt.Fprintf(stderr, "%s:%d: %s: %s\n", f.input, e.Line, e.Code, e.Message)
		}
		return exitFailed
	}
	if err := writeBatchResults(srv, f.input, f.out, b.OutputFileID, b.ErrorFileID); err != nil {
		return fail(exitFailed, "%v", err)
	}
	if b.Status != "completed" || b.RequestCounts.Failed > 0 {
		return exitFailed
	}
	return exitOK
}

// batchState is the part of a batch object the offline run reads.
type batchState struct {
	ID            string            `json:"id"`
	Status        string            `json:"status"`
	OutputFileID  string            `json:"output_file_id"`
	ErrorFileID   string            `json:"error_file_id"`
	Metadata      map[string]string `json:"metadata"`
	RequestCounts struct {
		Total, Completed, Failed int64
	} `json:"request_counts"`
	Errors struct {
		Data []struct {
			Code, Message string
			Line          int
		}
	} `json:"errors"`
}

// scanBatchInput reads the requests file once: its SHA-256 and the models
// its lines name.
func scanBatchInput(path string) (string, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(f, h))
	sc.Buffer(make([]byte, 64<<10), server.DefaultMaxBodyBytes+64<<10)
	seen := map[string]bool{}
	var models []string
	for sc.Scan() {
		var l struct {
			Body struct {
				Model string `json:"model"`
			} `json:"body"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Body.Model != "" && !seen[l.Body.Model] {
			seen[l.Body.Model] = true
			models = append(models, l.Body.Model)
		}
	}
	if err := sc.Err(); err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), models, nil
}

// findOrCreateBatch returns the store's batch of the input with SHA-256
// sum (resumed by the server already, if unfinished), or uploads the input
// and creates one.
func findOrCreateBatch(ctx context.Context, srv *server.Server, input, sum string) (batchState, error) {
	var page struct {
		Data []batchState `json:"data"`
	}
	if err := callJSON(srv, http.MethodGet, "/v1/batches?limit=100", "", nil, &page); err != nil {
		return batchState{}, err
	}
	for _, b := range page.Data {
		if b.Metadata["input_sha256"] == sum && b.Status != "cancelled" {
			return b, nil
		}
	}
	f, err := os.Open(input)
	if err != nil {
		return batchState{}, err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { // owned by the upload below, which reads the pipe to its end
		err := mw.WriteField("purpose", "batch")
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", filepath.Base(input)); err == nil {
				if _, err = io.Copy(part, f); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	var file struct{ ID string }
	err = callJSON(srv, http.MethodPost, "/v1/files", mw.FormDataContentType(), pr, &file)
	pr.CloseWithError(errors.New("upload done"))
	if err != nil {
		return batchState{}, err
	}
	body, _ := json.Marshal(map[string]any{"input_file_id": file.ID, "endpoint": "/v1/chat/completions",
		"completion_window": "24h", "metadata": map[string]string{"input_sha256": sum, "input": filepath.Base(input)}})
	var b batchState
	err = callJSON(srv, http.MethodPost, "/v1/batches", "application/json", bytes.NewReader(body), &b)
	return b, err
}

// callJSON calls the server's handler in-process and decodes its JSON
// answer into out.
func callJSON(srv *server.Server, method, path, contentType string, body io.Reader, out any) error {
	req := httptest.NewRequest(method, path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return json.Unmarshal(rec.Body.Bytes(), out)
}

// fileReader opens the content of one of the server's files as a line
// reader; "" gives an empty one. The caller closes the pipe it returns,
// which ends the goroutine serving the file.
func fileReader(srv *server.Server, id string) (*bufio.Scanner, io.Closer) {
	if id == "" {
		return bufio.NewScanner(strings.NewReader("")), io.NopCloser(nil)
	}
	pr, pw := io.Pipe()
	go func() { // owned by the scanner's reader: it reads the pipe to its end
		req := httptest.NewRequest(http.MethodGet, "/v1/files/"+id+"/content", nil)
		w := &pipeWriter{w: pw, header: http.Header{}}
		srv.ServeHTTP(w, req)
		if w.status != 0 && w.status != http.StatusOK {
			pw.CloseWithError(fmt.Errorf("file %s: status %d", id, w.status))
			return
		}
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return sc, pr
}

// pipeWriter is an http.ResponseWriter writing its body to a pipe.
type pipeWriter struct {
	w      *io.PipeWriter
	header http.Header
	status int
}

func (p *pipeWriter) Header() http.Header { return p.header }
func (p *pipeWriter) WriteHeader(s int) {
	if p.status == 0 {
		p.status = s
	}
}
func (p *pipeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	if p.status != http.StatusOK {
		return len(b), nil
	}
	return p.w.Write(b)
}

// writeBatchResults writes the output and error lines to out in input
// order (each file is in input order already: this merges them by the
// input's custom_ids), through a temporary file renamed at the end.
func writeBatchResults(srv *server.Server, input, out, outputID, errorID string) error {
	in, err := os.Open(input)
	if err != nil {
		return err
	}
	defer in.Close()
	outs, closeOuts := fileReader(srv, outputID)
	defer closeOuts.Close()
	errs, closeErrs := fileReader(srv, errorID)
	defer closeErrs.Close()
	type head struct {
		sc   *bufio.Scanner
		line []byte
		id   string
		ok   bool
	}
	advance := func(h *head) {
		h.ok = h.sc.Scan()
		if h.ok {
			h.line = bytes.Clone(h.sc.Bytes())
			var l struct {
				CustomID string `json:"custom_id"`
			}
			json.Unmarshal(h.line, &l)
			h.id = l.CustomID
		}
	}
	heads := []*head{{sc: outs}, {sc: errs}}
	for _, h := range heads {
		advance(h)
	}
	tmp := out + ".tmp"
	of, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriter(of)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), server.DefaultMaxBodyBytes+64<<10)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if len(bytes.TrimSpace(sc.Bytes())) == 0 || json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		for _, h := range heads {
			if h.ok && h.id == l.CustomID {
				bw.Write(h.line)
				bw.WriteByte('\n')
				advance(h)
				break
			}
		}
	}
	for _, h := range heads {
		if h.ok {
			of.Close()
			return fmt.Errorf("result %s is not in the input's order", h.id)
		}
		if err := h.sc.Err(); err != nil {
			of.Close()
			return err
		}
	}
	if err := errors.Join(sc.Err(), bw.Flush(), of.Sync()); err != nil {
		of.Close()
		return err
	}
	if err := of.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
