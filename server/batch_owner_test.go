package server_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// TestBatchesBelongToTheirKey: a key sees, reads, uses and cancels only
// its own files and batches; another key's are not found (404), as if
// they did not exist, and its lists are empty.
func TestBatchesBelongToTheirKey(t *testing.T) {
	const keyA, keyB = "sk-owner-a-0123456789", "sk-owner-b-0123456789"
	g := batchGateway(t, t.TempDir(), server.Config{Keys: []server.Key{
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
