package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
)

// TestBatchesBelongToTheirKey: a key sees, reads, uses and cancels only
// its own files and batches; another key's are not found (404), as if
// they did not exist, and its lists are empty.
func TestBatchesBelongToTheirKey(t *testing.T) {
	const keyA, keyB = "sk-owner-a-0123456789", "sk-owner-b-0123456789"
	dir := t.TempDir()
	g := batchGateway(t, dir, server.Config{Keys: []server.Key{
		{Name: "a", SHA256: server.HashKey(keyA)}, {Name: "b", SHA256: server.HashKey(keyB)},
	}}, sim.Config{Seed: 1})
	a, b := g.client(keyA), g.client(keyB)
	ctx := context.Background()

	done := waitBatch(t, a, submitBatch(t, a, batchInput(5, nil)).ID)
	if done.Status != openai.BatchStatusCompleted || done.OutputFileID == "" {
		t.Fatalf("a's batch = %+v, want completed with an output file", done)
	}
	resp, err := a.Files.Content(ctx, done.OutputFileID)
	if err != nil {
		t.Fatalf("a reads its output: %v", err)
	}
	resp.Body.Close()
	notFound := func(what string, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("b %s: %v, want 404", what, err)
		}
	}
	_, err = b.Files.Get(ctx, done.InputFileID)
	notFound("gets a's input file", err)
	if resp, err := b.Files.Content(ctx, done.OutputFileID); err == nil {
		resp.Body.Close()
		t.Error("b reads a's output")
	} else {
		notFound("reads a's output", err)
	}
	_, err = b.Files.Delete(ctx, done.InputFileID)
	notFound("deletes a's file", err)
	_, err = b.Batches.Get(ctx, done.ID)
	notFound("gets a's batch", err)
	_, err = b.Batches.Cancel(ctx, done.ID)
	notFound("cancels a's batch", err)
	_, err = b.Batches.New(ctx, openai.BatchNewParams{InputFileID: done.InputFileID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	notFound("runs a's file", err)

	files, err := b.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(files.Data) != 0 {
		t.Errorf("b's files = %v, %v; want none", files, err)
	}
	batches, err := b.Batches.List(ctx, openai.BatchListParams{})
	if err != nil || len(batches.Data) != 0 {
		t.Errorf("b's batches = %v, %v; want none", batches, err)
	}
	mine, err := a.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(mine.Data) != 2 { // the input and the output
		t.Errorf("a's files = %d, %v; want its input and output", len(mine.Data), err)
	}
	// b's own batch runs as usual.
	if got := waitBatch(t, b, submitBatch(t, b, batchInput(3, nil)).ID); got.Status != openai.BatchStatusCompleted {
		t.Errorf("b's batch = %s, want completed", got.Status)
	}
}

// TestBatchOwnerIsTheKey: objects belong to the key, not to its name: a
// key renamed in the config still sees its batch, and two keys may not
// share a name (an unnamed key is called key-N by position).
func TestBatchOwnerIsTheKey(t *testing.T) {
	const key = "sk-owner-rename-0123456789"
	dir := t.TempDir()
	st, err := batchapi.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}},
		Keys:     []server.Key{{Name: "old-name", SHA256: server.HashKey(key)}},
		Batches:  st,
	})
	done := waitBatch(t, g.client(key), submitBatch(t, g.client(key), batchInput(3, nil)).ID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	g2 := newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}},
		Keys:     []server.Key{{Name: "new-name", SHA256: server.HashKey(key)}},
		Batches:  openStore(t, dir),
	})
	if got, err := g2.client(key).Batches.Get(ctx, done.ID); err != nil || got.Status != openai.BatchStatusCompleted {
		t.Fatalf("renamed key's batch = %v, %v; want it, completed", got, err)
	}

	_, err = server.New(server.Config{Engine: g2.engine, Keys: []server.Key{
		{SHA256: server.HashKey("sk-one-0123456789")}, {Name: "key-0", SHA256: server.HashKey("sk-two-0123456789")},
	}})
	if err == nil || !strings.Contains(err.Error(), `both named "key-0"`) {
		t.Fatalf("two keys named key-0: %v, want an error naming them", err)
	}
}

// TestBatchInputCannotBeDeletedWhileRunning: deleting the input of an
// unfinished batch is refused (409), so the batch can still finalize;
// once it ended, the file can go.
func TestBatchInputCannotBeDeletedWhileRunning(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{}, sim.Config{Seed: 1, Latency: 50 * time.Millisecond})
	c := g.client("")
	b := submitBatch(t, c, batchInput(20, nil))
	_, err := c.Files.Delete(context.Background(), b.InputFileID)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Fatalf("delete the running batch's input: %v, want 409", err)
	}
	done := waitBatch(t, c, b.ID)
	if done.Status != openai.BatchStatusCompleted || done.RequestCounts.Completed != 20 {
		t.Fatalf("batch %s, %d completed; want completed 20", done.Status, done.RequestCounts.Completed)
	}
	if _, err := c.Files.Delete(context.Background(), b.InputFileID); err != nil {
		t.Fatalf("delete the finished batch's input: %v", err)
	}
}
