package server_test

import (
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/server"
)

// TestBatchLinesWaitForSlots: batch lines queued behind a one-slot
// backend wait as long as the batch's window allows, not one request's
// timeout: every line completes though the queue lasts 4× RequestTimeout.
func TestBatchLinesWaitForSlots(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 4, Latency: 100 * time.Millisecond})
	be := batchagent.Backend{Model: m, Name: "sim"}
	e, err := batchagent.New(batchagent.Config{Backends: map[batchagent.Backend]batchagent.Admission{be: {MaxInflight: 1, FixedInflight: true}}})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Engine: e, Backends: map[string]batchagent.Backend{"sim": be},
		Batches: openStore(t, t.TempDir()), BatchConcurrency: 20, RequestTimeout: 500 * time.Millisecond})
	c := g.client("")
	const n = 20
	b := waitBatch(t, c, submitBatch(t, c, batchInput(n, nil)).ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != n || b.RequestCounts.Failed != 0 {
		t.Fatalf("batch %s: %d completed, %d failed; want all %d completed", b.Status, b.RequestCounts.Completed, b.RequestCounts.Failed, n)
	}
}

// TestBatchRetriesMomentaryRefusals: lines refused with 429 during an
// upstream rate-limit storm are asked again, and all complete.
func TestBatchRetriesMomentaryRefusals(t *testing.T) {
	_, url := simHTTP(t, simhttp.Config{Model: sim.Config{Seed: 3, ToolTurns: -1},
		Fault: simhttp.FaultRateLimited, FaultFor: 1500 * time.Millisecond})
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: openaiBackend(t, url, ""), Name: "sim"}},
		Batches:  openStore(t, t.TempDir()),
	})
	c := g.client("")
	const n = 10
	b := waitBatch(t, c, submitBatch(t, c, batchInput(n, nil)).ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != n {
		out, errs := results(t, c, b, n)
		t.Fatalf("batch %s: %d completed, %d failed (%d output, %d error lines); want all %d completed",
			b.Status, b.RequestCounts.Completed, b.RequestCounts.Failed, len(out), len(errs), n)
	}
}
