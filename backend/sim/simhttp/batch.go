package simhttp

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/batchagent/batchagent/server/batchapi"
)

// batchMode is a Server's Batch API (Config.Batch): a batchapi.Server
// whose lines the simulator answers in-process, on a store in a
// temporary directory, and the counts of what was submitted.
type batchMode struct {
	api   *batchapi.Server
	store *batchapi.Store
	dir   string
	mux   *http.ServeMux

	mu        sync.Mutex
	seen      map[string]int // custom_id → batches whose input held it
	batches   int64
	lines     int64
	duplicate int64
}

// BatchStats counts what was submitted to a Server's Batch API, as
// GET /sim/batch/stats serves it.
type BatchStats struct {
	// Batches counts the batches created.
	Batches int64 `json:"batches"`
	// Lines counts the lines of their input files.
	Lines int64 `json:"lines"`
	// DuplicateSubmissions counts the custom_ids that were in the input
	// files of more than one batch: calls submitted, and billed, twice.
	DuplicateSubmissions int64 `json:"duplicate_submissions"`
}

// newBatchMode opens the Batch API of s on a store in a new temporary
// directory, which close removes.
func newBatchMode(s *Server) (*batchMode, error) {
	dir, err := os.MkdirTemp("", "batchagent-sim-batch-")
	if err != nil {
		return nil, fmt.Errorf("simhttp: batch store: %w", err)
	}
	st, err := batchapi.Open(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("simhttp: batch store: %w", err)
	}
	concurrency := 0 // batchapi's default
	if s.cfg.MaxQueue > 0 {
		// As many lines in flight as the server runs and queues: no 429s.
		concurrency = s.cfg.MaxSeqs + s.cfg.MaxQueue
	}
	api, err := batchapi.New(batchapi.Config{Store: st, Exec: s.execLine, Concurrency: concurrency, Hold: s.cfg.BatchDelay, Logger: s.cfg.Logger})
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("simhttp: batch API: %w", err)
	}
	b := &batchMode{api: api, store: st, dir: dir, mux: http.NewServeMux(), seen: map[string]int{}}
	for pattern, h := range api.Routes() {
		if pattern == "POST /v1/batches" {
			h = b.counting(h)
		}
		b.mux.Handle(pattern, h)
	}
	return b, nil
}

// serveBatch serves a request to the Batch API once Run has opened it.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.batchReady:
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	stopped := s.phase == phaseStopped
	s.mu.Unlock()
	if s.batch == nil || stopped {
		writeError(w, errNotRunning)
		return
	}
	s.batch.mux.ServeHTTP(w, r)
}

// close stops the batches' runners and removes the store.
func (b *batchMode) close() error {
	b.api.Stop()
	err := b.store.Close()
	return errors.Join(err, os.RemoveAll(b.dir))
}

// isBatchPath reports whether path is the Batch API's.
func isBatchPath(path string) bool {
	return path == "/v1/files" || path == "/v1/batches" ||
		strings.HasPrefix(path, "/v1/files/") || strings.HasPrefix(path, "/v1/batches/")
}

// stats returns the counts.
func (b *batchMode) stats() BatchStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BatchStats{Batches: b.batches, Lines: b.lines, DuplicateSubmissions: b.duplicate}
}

// counting wraps the batch-create handler: once a batch is created, it
// reads the batch's input file and counts its lines and the custom_ids
// that an earlier batch held too.
func (b *batchMode) counting(create http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{header: http.Header{}}
		create.ServeHTTP(rec, r)
		rec.copyTo(w)
		if rec.status != http.StatusOK {
			return
		}
		var created struct {
			InputFileID string `json:"input_file_id"`
		}
		if json.Unmarshal(rec.body.Bytes(), &created) != nil || created.InputFileID == "" {
			return
		}
		get, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/v1/files/"+created.InputFileID+"/content", nil)
		if err != nil {
			return
		}
		content := &recorder{header: http.Header{}}
		b.mux.ServeHTTP(content, get)
		if content.status != http.StatusOK {
			return
		}
		b.count(&content.body)
	})
}

// count counts one batch's input file.
func (b *batchMode) count(input io.Reader) {
	ids := map[string]bool{}
	var lines int64
	sc := bufio.NewScanner(input)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		lines++
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			ids[l.CustomID] = true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches++
	b.lines += lines
	for id := range ids {
		b.seen[id]++
		if b.seen[id] == 2 {
			b.duplicate++
		}
	}
}

// execLine is the batches' ExecFunc: it answers a line's body with the
// server's own chat-completion handler, outside the account's rate
// limits (Config.RPM and TPM apply to real-time calls only).
func (s *Server) execLine(ctx context.Context, _ string, body json.RawMessage) (int, json.RawMessage, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return http.StatusInternalServerError, json.RawMessage(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`), err
	}
	rec := &recorder{header: http.Header{}}
	s.serveChat(rec, r, nil)
	if rec.status == 0 {
		// The handler wrote nothing: ctx ended first.
		return http.StatusServiceUnavailable, json.RawMessage(`{"error":{"message":"stopped","type":"server_error","param":null,"code":null}}`), cmp.Or(ctx.Err(), errors.New("no answer"))
	}
	answer := bytes.TrimSpace(rec.body.Bytes())
	if !json.Valid(answer) {
		// An injected malformed fault: a server error for the line.
		return http.StatusInternalServerError, json.RawMessage(`{"error":{"message":"malformed answer","type":"server_error","param":null,"code":null}}`), errors.New("malformed answer")
	}
	if rec.status != http.StatusOK {
		return rec.status, answer, fmt.Errorf("HTTP %d", rec.status)
	}
	return rec.status, answer, nil
}

// recorder is an http.ResponseWriter that keeps what is written.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// copyTo writes what r recorded to w.
func (r *recorder) copyTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(cmp.Or(r.status, http.StatusOK))
	w.Write(r.body.Bytes())
}
