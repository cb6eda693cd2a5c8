package simhttp_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
)

// batchStats reads GET /sim/batch/stats.
func batchStats(t *testing.T, ts *testServer) simhttp.BatchStats {
	t.Helper()
	resp, err := ts.client.Get(ts.url + "/sim/batch/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st simhttp.BatchStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sim/batch/stats: %d, %v", resp.StatusCode, err)
	}
	if st != ts.BatchStats() {
		t.Errorf("served stats %+v, BatchStats() %+v", st, ts.BatchStats())
	}
	return st
}

// runBatch submits a line per id through p and waits for the batch's
// results, returning them and how long the batch took from its creation.
func runBatch(t *testing.T, p *openai.Batch, ids ...string) (map[string]batchmode.Result, time.Duration, []string) {
	t.Helper()
	ctx := t.Context()
	var lines [][]byte
	for _, id := range ids {
		l, err := p.Encode(id, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "question " + id}}, MaxTokens: 32})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	fileID, err := p.Upload(ctx, "in.jsonl", lines)
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	start := time.Now()
	batchID, err := p.Create(ctx, fileID, lines, "tag")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	var st batchmode.Status
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err = p.Poll(ctx, batchID); err != nil {
			t.Fatalf("Poll: %v", err)
		}
		if st.State != batchmode.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch still running: %+v", st)
		}
	}
	took := time.Since(start)
	if st.State != batchmode.Ended || st.Expired || st.Cancelled || st.Done != len(ids) || st.Total != len(ids) {
		t.Fatalf("status %+v, want %d lines ended", st, len(ids))
	}
	got := map[string]batchmode.Result{}
	if err := p.Results(ctx, batchID, st, func(r batchmode.Result) error { got[r.ID] = r; return nil }); err != nil {
		t.Fatalf("Results: %v", err)
	}
	return got, took, []string{fileID, st.OutputFile, st.ErrorFile}
}

// TestBatchMode serves batches end to end with openai's Batch provider:
// a batch completes no sooner than BatchDelay, its results match the
// custom_ids, its lines pass the account's rate limits, and a custom_id
// submitted in a second batch is counted as a duplicate.
func TestBatchMode(t *testing.T) {
	const delay = 500 * time.Millisecond
	cfg := fast
	cfg.Batch, cfg.BatchDelay = true, delay
	cfg.Model = sim.Config{ToolTurns: -1}
	cfg.RPM = 1 // real-time calls only: the batch's lines are not limited
	ts := startServer(t, cfg)
	p, err := openai.NewBatch(openai.Config{BaseURL: ts.url + "/v1", Flavor: openai.FlavorSim, HTTPClient: ts.client})
	if err != nil {
		t.Fatal(err)
	}

	got, took, files := runBatch(t, p, "a", "b", "c")
	if took < delay {
		t.Errorf("batch took %v, want at least the delay %v", took, delay)
	}
	for _, id := range []string{"a", "b", "c"} {
		r := got[id]
		if r.Err != nil || r.Resp == nil || r.Resp.Message.Content == "" || r.Resp.Usage.PromptTokens == 0 {
			t.Errorf("result %s = %+v, want an answer with usage", id, r)
		}
	}
	if len(got) != 3 {
		t.Errorf("%d results, want 3", len(got))
	}
	if st := batchStats(t, ts); st != (simhttp.BatchStats{Batches: 1, Lines: 3}) {
		t.Errorf("stats after one batch = %+v", st)
	}
	if err := p.Delete(t.Context(), files...); err != nil {
		t.Errorf("Delete: %v", err)
	}

	got, _, _ = runBatch(t, p, "a", "d")
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, []string{"a", "d"}) {
		t.Errorf("second batch's results %v", ids)
	}
	if st := batchStats(t, ts); st != (simhttp.BatchStats{Batches: 2, Lines: 5, DuplicateSubmissions: 1}) {
		t.Errorf("stats after a repeated custom_id = %+v, want 1 duplicate", st)
	}
	if ts.Stats().RateLimited != 0 {
		t.Errorf("%d lines rate limited, want none", ts.Stats().RateLimited)
	}
}

// TestBatchModeRemovesItsStore: the store's temporary directory is gone
// once Run returns.
func TestBatchModeRemovesItsStore(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "batchagent-sim-batch-*"))
	t.Run("serve", func(t *testing.T) {
		cfg := fast
		cfg.Batch = true
		ts := startServer(t, cfg)
		batchStats(t, ts)
		now, _ := filepath.Glob(filepath.Join(os.TempDir(), "batchagent-sim-batch-*"))
		if len(now) != len(before)+1 {
			t.Errorf("%d store directories while serving, want %d", len(now), len(before)+1)
		}
	})
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "batchagent-sim-batch-*"))
	if len(after) != len(before) {
		t.Errorf("store directories: %d before, %d after: %v", len(before), len(after), after)
	}
	// Without Batch, no Batch API.
	ts := startServer(t, fast)
	resp, err := ts.client.Get(ts.url + "/v1/batches")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/batches without Batch = %d, want 404", resp.StatusCode)
	}
}
