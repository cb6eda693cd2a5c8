package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
)

// Defaults of the batch scenario.
const (
	DefaultBatchN = 50_000
	// batchInflight is the simulator's slots and the batch's lines in
	// flight.
	batchInflight = 256
	// batchLatency is the simulator's time per call.
	batchLatency = time.Millisecond
)

// BatchOptions configures the batch scenario. The zero value runs the
// defaults.
type BatchOptions struct {
	// N is the lines of the batch. Defaults to DefaultBatchN.
	N int
	// Dir holds the input file and the server's store. Empty means a
	// temporary directory, removed afterwards.
	Dir string
	// JSON prints the report as one JSON object instead of a line of text.
	JSON bool
}

// BatchReport is the batch scenario's result: one batch of N lines
// through the gateway's Batch API (upload, create, poll to completed,
// download the output), on the in-process simulator. WallS runs from
// creating the batch to its completion, output file written; PeakRSSMB
// is the whole process's peak while it ran.
type BatchReport struct {
	Scenario  string  `json:"scenario"`
	Mode      string  `json:"mode"`
	N         int     `json:"n"`
	WallS     float64 `json:"wall_s"`
	LinesPerS float64 `json:"lines_per_s"`
	OK        int64   `json:"ok"`
	Failed    int64   `json:"failed"`
	// OutputLines is the lines of the downloaded output file.
	OutputLines int     `json:"output_lines"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	CPUS        float64 `json:"cpu_s"`
	// InputMB is the size of the uploaded file.
	InputMB float64 `json:"input_mb"`
}

// RunBatch runs the batch scenario and writes its report to w.
func RunBatch(ctx context.Context, opt BatchOptions, w io.Writer) (BatchReport, error) {
	if opt.N < 0 {
		return BatchReport{}, errors.New("bench: -n must be positive")
	}
	if opt.N == 0 {
		opt.N = DefaultBatchN
	}
	dir := opt.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "batchagent-bench-batch-")
		if err != nil {
			return BatchReport{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	input := filepath.Join(dir, "batch-input.jsonl")
	size, err := writeBatchInput(input, opt.N)
	if err != nil {
		return BatchReport{}, err
	}
	m, err := sim.New(sim.Config{Seed: 1, Latency: batchLatency, ToolTurns: -1})
	if err != nil {
		return BatchReport{}, err
	}
	backend := batchagent.Backend{Model: m, Name: "sim"}
	engine, err := batchagent.New(batchagent.Config{Backends: map[batchagent.Backend]batchagent.Admission{
		backend: {MaxInflight: batchInflight, FixedInflight: true},
	}})
	if err != nil {
		return BatchReport{}, err
	}
	store, err := batchapi.Open(filepath.Join(dir, "store"))
	if err != nil {
		return BatchReport{}, err
	}
	defer store.Close()
	srv, err := server.New(server.Config{Engine: engine, Backends: map[string]batchagent.Backend{"sim": backend},
		Batches: store, BatchMaxLines: opt.N, BatchConcurrency: batchInflight})
	if err != nil {
		return BatchReport{}, err
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()

	resetPeakRSS()
	cpu0 := cpuTime()
	fileID, err := uploadBatchFile(ctx, hs.URL, input)
	if err != nil {
		return BatchReport{}, err
	}
	start := time.Now()
	var b struct {
		ID            string `json:"id"`
		Status        string `json:"status"`
		OutputFileID  string `json:"output_file_id"`
		RequestCounts struct {
			Completed, Failed int64
		} `json:"request_counts"`
	}
	body := fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, fileID)
	if err := postJSON(ctx, hs.URL+"/v1/batches", body, &b); err != nil {
		return BatchReport{}, err
	}
	for b.Status != "completed" {
		switch b.Status {
		case "failed", "expired", "cancelled":
			return BatchReport{}, fmt.Errorf("bench: batch %s ended %s", b.ID, b.Status)
		}
		select {
		case <-ctx.Done():
			return BatchReport{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if err := getJSON(ctx, hs.URL+"/v1/batches/"+b.ID, &b); err != nil {
			return BatchReport{}, err
		}
	}
	wall := time.Since(start)
	lines, err := countLines(ctx, hs.URL+"/v1/files/"+b.OutputFileID+"/content")
	if err != nil {
		return BatchReport{}, err
	}
	r := BatchReport{
		Scenario: "batch", Mode: "server", N: opt.N, WallS: round(wall.Seconds(), 3),
		LinesPerS: round(float64(opt.N)/wall.Seconds(), 1), OK: b.RequestCounts.Completed, Failed: b.RequestCounts.Failed,
		OutputLines: lines, PeakRSSMB: round(peakRSSMB(), 1), CPUS: round((cpuTime() - cpu0).Seconds(), 2),
		InputMB: round(float64(size)/(1<<20), 1),
	}
	if opt.JSON {
		out, _ := json.Marshal(r)
		fmt.Fprintln(w, string(out))
	} else {
		fmt.Fprintf(w, "batch  n=%d  wall %.2fs  %.0f lines/s  ok %d  failed %d  peak RSS %.0f MB  cpu %.1fs\n",
			r.N, r.WallS, r.LinesPerS, r.OK, r.Failed, r.PeakRSSMB, r.CPUS)
	}
	return r, nil
}

// writeBatchInput writes n chat-completion lines to path and returns its
// size.
func writeBatchInput(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(bw, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"sim","max_tokens":16,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Summarize item %d."}]}}`+"\n", i, i)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return fi.Size(), f.Close()
}

// uploadBatchFile uploads path with purpose batch, streaming it, and
// returns the file's ID.
func uploadBatchFile(ctx context.Context, base, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { // owned by the request below, which reads the pipe to its end or closes it
		err := mw.WriteField("purpose", "batch")
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", filepath.Base(path)); err == nil {
				if _, err = io.Copy(part, f); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/files", pr)
	if err != nil {
		pr.Close()
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out struct{ ID string }
	if err := doJSON(req, &out); err != nil {
		pr.CloseWithError(err)
		return "", err
	}
	return out.ID, nil
}

func postJSON(ctx context.Context, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return doJSON(req, out)
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return doJSON(req, out)
}

func doJSON(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("bench: %s %s: %s: %s", req.Method, req.URL.Path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// countLines downloads url and counts its lines.
func countLines(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("bench: GET %s: %s", req.URL.Path, resp.Status)
	}
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := resp.Body.Read(buf)
		n += bytes.Count(buf[:k], []byte("\n"))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
