package openaibatch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/openaibatch"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
)

// batchAPI returns a gateway with the simulator as model "sim" and its
// Batch API's store in dir, and what shuts it down and closes the store
// (at the test's end too; once is enough).
func batchAPI(t *testing.T, dir string, latency time.Duration) (*server.Server, func()) {
	t.Helper()
	m, err := sim.New(sim.Config{Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := batchapi.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Engine: e, Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}}, Batches: store})
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		store.Close()
	})
	t.Cleanup(stop)
	return srv, stop
}

// writeInput writes n request lines, each 7th naming a model the gateway
// does not have, and scans them.
func writeInput(t *testing.T, dir string, n int) openaibatch.Input {
	t.Helper()
	var b strings.Builder
	for i := range n {
		model := "sim"
		if i%7 == 3 {
			model = "missing"
		}
		fmt.Fprintf(&b, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, model, i)
	}
	path := filepath.Join(dir, "requests.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := openaibatch.Scan(path)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// resultLine is one line of the results file.
type resultLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int `json:"status_code"`
	} `json:"response"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// readResults reads the results file at path, checking that it holds
// each of n custom_ids once, in input order, and returns its lines.
func readResults(t *testing.T, path string, n int) []resultLine {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []resultLine
	for i, s := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var l resultLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, s)
		}
		if want := fmt.Sprintf("c%d", i); l.CustomID != want {
			t.Fatalf("line %d: custom_id %q, want %q", i+1, l.CustomID, want)
		}
		lines = append(lines, l)
	}
	if len(lines) != n {
		t.Fatalf("%d result lines, want %d", len(lines), n)
	}
	return lines
}

// TestScan: the file's SHA-256 and the models its lines name, each once
// in first-seen order.
func TestScan(t *testing.T) {
	dir := t.TempDir()
	in := writeInput(t, dir, 10)
	raw, err := os.ReadFile(in.Path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if in.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 = %s, want %x", in.SHA256, sum)
	}
	if !slices.Equal(in.Models, []string{"sim", "missing"}) {
		t.Errorf("Models = %q, want [sim missing]", in.Models)
	}
	if _, err := openaibatch.Scan(filepath.Join(dir, "absent.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Scan of a missing file: %v, want os.ErrNotExist", err)
	}
}

// TestRunWritesInputOrder: a batch run to its end writes every line's
// result in input order, the output lines and the error lines (a model
// the gateway lacks) merged; OnPoll sees the batch end.
func TestRunWritesInputOrder(t *testing.T) {
	dir := t.TempDir()
	const n = 60
	in := writeInput(t, dir, n)
	out := filepath.Join(dir, "results.jsonl")
	var polled []openaibatch.Batch
	api, _ := batchAPI(t, filepath.Join(dir, "state"), 0)
	b, err := openaibatch.Run(t.Context(), openaibatch.Config{API: api, Input: in, Out: out,
		Every: 5 * time.Millisecond, OnPoll: func(b openaibatch.Batch) { polled = append(polled, b) }})
	if err != nil {
		t.Fatal(err)
	}
	const failed = n/7 + 1 // lines 3, 10, ..., 59
	if b.Status != "completed" || b.RequestCounts.Total != n || b.RequestCounts.Failed != failed || b.RequestCounts.Completed != n-failed {
		t.Fatalf("batch %s, counts %+v; want completed, %d of %d failed", b.Status, b.RequestCounts, failed, n)
	}
	if len(polled) == 0 || polled[len(polled)-1].Status != "completed" {
		t.Errorf("OnPoll saw %d states, want the last completed", len(polled))
	}
	for i, l := range readResults(t, out, n) {
		ok := l.Response != nil && l.Response.StatusCode == 200 && l.Error == nil
		if want := i%7 != 3; ok != want {
			t.Errorf("line %d: answered %v, want %v: %+v", i+1, ok, want, l)
		}
	}
	if _, err := os.Stat(out + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is left: %v", err)
	}
}

// TestRunResumes: a run whose context ends returns its error and writes
// nothing; a second run on the same store finds the same batch, resumes
// it and writes every result.
func TestRunResumes(t *testing.T) {
	dir := t.TempDir()
	const n = 400
	in := writeInput(t, dir, n)
	out := filepath.Join(dir, "results.jsonl")
	state := filepath.Join(dir, "state")
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	api, stop := batchAPI(t, state, 40*time.Millisecond)
	first, err := openaibatch.Run(ctx, openaibatch.Config{API: api, Input: in, Out: out})
	stop() // as the command does when interrupted; the next run resumes
	if !errors.Is(err, context.DeadlineExceeded) || first.ID == "" || first.Ended() {
		t.Fatalf("interrupted run: batch %q %s, %v; want an unfinished batch and the context's error", first.ID, first.Status, err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an interrupted run wrote the results: %v", err)
	}
	api, _ = batchAPI(t, state, time.Millisecond)
	b, err := openaibatch.Run(t.Context(), openaibatch.Config{API: api, Input: in, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != first.ID || b.Status != "completed" {
		t.Fatalf("resumed run: batch %s %s, want %s completed", b.ID, b.Status, first.ID)
	}
	readResults(t, out, n)
}
