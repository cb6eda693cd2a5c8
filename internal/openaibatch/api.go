package openaibatch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
)

// findOrCreate returns api's batch of the input with in's SHA-256 (resumed
// by the API already, if unfinished), or uploads the input and creates
// one.
func findOrCreate(api http.Handler, in Input) (Batch, error) {
	var page struct {
		Data []Batch `json:"data"`
	}
	if err := callJSON(api, http.MethodGet, "/v1/batches?limit=100", "", nil, &page); err != nil {
		return Batch{}, err
	}
	for _, b := range page.Data {
		if b.Metadata["input_sha256"] == in.SHA256 && b.Status != "cancelled" {
			return b, nil
		}
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return Batch{}, err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	uploaded := make(chan struct{})
	go func() { // owned by this call: it waits for the goroutine before f closes
		defer close(uploaded)
		err := mw.WriteField("purpose", "batch")
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", filepath.Base(in.Path)); err == nil {
				if _, err = io.Copy(part, f); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	var file struct{ ID string }
	err = callJSON(api, http.MethodPost, "/v1/files", mw.FormDataContentType(), pr, &file)
	pr.CloseWithError(errors.New("upload done")) // ends the writer's copy, if the upload stopped early
	<-uploaded
	if err != nil {
		return Batch{}, err
	}
	body, _ := json.Marshal(map[string]any{"input_file_id": file.ID, "endpoint": "/v1/chat/completions",
		"completion_window": "24h", "metadata": map[string]string{"input_sha256": in.SHA256, "input": filepath.Base(in.Path)}})
	var b Batch
	err = callJSON(api, http.MethodPost, "/v1/batches", "application/json", bytes.NewReader(body), &b)
	return b, err
}

// callJSON calls api in-process and decodes its JSON answer into out.
func callJSON(api http.Handler, method, path, contentType string, body io.Reader, out any) error {
	req := httptest.NewRequest(method, path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return json.Unmarshal(rec.Body.Bytes(), out)
}

// fileReader opens the content of one of api's files as a line reader;
// "" gives an empty one. The caller closes the pipe it returns, which ends
// the goroutine serving the file.
func fileReader(api http.Handler, id string) (*bufio.Scanner, io.Closer) {
	if id == "" {
		return bufio.NewScanner(strings.NewReader("")), io.NopCloser(nil)
	}
	pr, pw := io.Pipe()
	go func() { // owned by the scanner's reader: it reads the pipe to its end
		req := httptest.NewRequest(http.MethodGet, "/v1/files/"+id+"/content", nil)
		w := &pipeWriter{w: pw, header: http.Header{}}
		api.ServeHTTP(w, req)
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
