package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
	"github.com/batchagent/batchagent/server/batchapi"
	"github.com/batchagent/batchagent/tool"
)

// batchInput returns n input lines for model; the lines whose index is
// in bad ask for an unknown model.
func batchInput(n int, bad map[int]bool) []byte {
	var b bytes.Buffer
	for i := range n {
		model := "sim"
		if bad[i] {
			model = "nope"
		}
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"hello %d"}]}}`+"\n", i, model, i)
	}
	return b.Bytes()
}

func openStore(t *testing.T, dir string) *batchapi.Store {
	t.Helper()
	st, err := batchapi.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// batchGateway starts a gateway with a simulator backend "sim" and a
// batch store in dir.
func batchGateway(t *testing.T, dir string, cfg server.Config, sc sim.Config) *gateway {
	t.Helper()
	cfg.Backends = map[string]batchagent.Backend{"sim": {Model: newSim(t, sc), Name: "sim"}}
	cfg.Batches = openStore(t, dir)
	return newGateway(t, cfg)
}

func submitBatch(t *testing.T, c *openai.Client, input []byte) *openai.Batch {
	t.Helper()
	ctx := context.Background()
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(input), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	if f.Bytes != int64(len(input)) || f.Purpose != "batch" || f.Object != "file" {
		t.Fatalf("file object = %+v, want %d bytes of purpose batch", f, len(input))
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"run": "test"},
	})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	if b.Status != openai.BatchStatusValidating || b.InputFileID != f.ID || b.Metadata["run"] != "test" || b.ExpiresAt == 0 {
		t.Fatalf("new batch = %+v", b)
	}
	return b
}

// waitBatch polls the batch until it reaches a final status.
func waitBatch(t *testing.T, c *openai.Client, id string) *openai.Batch {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		b, err := c.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("Batches.Get: %v", err)
		}
		switch b.Status {
		case openai.BatchStatusCompleted, openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
			return b
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("batch %s not done in 60s", id)
	return nil
}

type resultLine struct {
	ID       string `json:"id"`
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

// fileLines downloads a file's lines ("" gives none).
func fileLines(t *testing.T, c *openai.Client, id string) []resultLine {
	t.Helper()
	if id == "" {
		return nil
	}
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("Files.Content(%s): %v", id, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []resultLine
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var r resultLine
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("file %s: line %q: %v", id, line, err)
		}
		out = append(out, r)
	}
	return out
}

// results returns the batch's output and error lines, checking that each
// of the n custom_ids appears exactly once across the two files, in input
// order within each.
func results(t *testing.T, c *openai.Client, b *openai.Batch, n int) (out, errs map[string]resultLine) {
	t.Helper()
	out, errs = map[string]resultLine{}, map[string]resultLine{}
	for _, f := range []struct {
		id   string
		into map[string]resultLine
	}{{b.OutputFileID, out}, {b.ErrorFileID, errs}} {
		last := -1
		for _, r := range fileLines(t, c, f.id) {
			var i int
			if _, err := fmt.Sscanf(r.CustomID, "req-%d", &i); err != nil || i < 0 || i >= n {
				t.Fatalf("unknown custom_id %q", r.CustomID)
			}
			if i <= last {
				t.Errorf("custom_id %s out of input order", r.CustomID)
			}
			last = i
			if _, dup := out[r.CustomID]; dup {
				t.Fatalf("custom_id %s twice", r.CustomID)
			}
			if _, dup := errs[r.CustomID]; dup {
				t.Fatalf("custom_id %s twice", r.CustomID)
			}
			if !strings.HasPrefix(r.ID, "batch_req_") {
				t.Errorf("line id %q", r.ID)
			}
			f.into[r.CustomID] = r
		}
	}
	if len(out)+len(errs) != n {
		t.Fatalf("%d output + %d error lines, want %d custom_ids", len(out), len(errs), n)
	}
	return out, errs
}

func TestBatchRoundTrip(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{}, sim.Config{Seed: 1})
	c := g.client("")
	const n = 40
	bad := map[int]bool{3: true, 17: true}
	// Two batches at once.
	b1 := submitBatch(t, c, batchInput(n, bad))
	b2 := submitBatch(t, c, batchInput(n, nil))
	for _, tc := range []struct {
		b   *openai.Batch
		bad map[int]bool
	}{{b1, bad}, {b2, nil}} {
		b := waitBatch(t, c, tc.b.ID)
		if b.Status != openai.BatchStatusCompleted {
			t.Fatalf("batch %s status %s, errors %+v", b.ID, b.Status, b.Errors)
		}
		if b.RequestCounts.Total != n || b.RequestCounts.Completed != int64(n-len(tc.bad)) || b.RequestCounts.Failed != int64(len(tc.bad)) {
			t.Errorf("request_counts = %+v", b.RequestCounts)
		}
		if b.InProgressAt == 0 || b.FinalizingAt == 0 || b.CompletedAt == 0 || b.CompletedAt < b.CreatedAt {
			t.Errorf("timestamps: in_progress %d finalizing %d completed %d", b.InProgressAt, b.FinalizingAt, b.CompletedAt)
		}
		if b.Model != "sim" || b.Usage.TotalTokens <= 0 || b.Usage.InputTokens+b.Usage.OutputTokens != b.Usage.TotalTokens {
			t.Errorf("model %q, usage %+v: want sim and the lines' tokens", b.Model, b.Usage)
		}
		out, errs := results(t, c, b, n)
		for id, r := range out {
			var body struct {
				Object  string `json:"object"`
				Model   string `json:"model"`
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if r.Response == nil || r.Response.StatusCode != 200 || r.Error != nil || json.Unmarshal(r.Response.Body, &body) != nil {
				t.Fatalf("%s: %+v", id, r)
			}
			if body.Object != "chat.completion" || body.Model != "sim" || len(body.Choices) != 1 || body.Choices[0].Message.Content == "" {
				t.Errorf("%s: body %s", id, r.Response.Body)
			}
		}
		for i := range tc.bad {
			r, ok := errs[fmt.Sprintf("req-%d", i)]
			if !ok || r.Response == nil || r.Response.StatusCode != 404 || !strings.Contains(string(r.Response.Body), "model_not_found") {
				t.Errorf("req-%d: error line %+v", i, r)
			}
		}
		if len(tc.bad) == 0 && b.ErrorFileID != "" {
			t.Errorf("error file %s with no failures", b.ErrorFileID)
		}
	}
	// List, paged with after and limit: newest first.
	ctx := context.Background()
	page, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b2.ID || !page.HasMore {
		t.Fatalf("List(limit 1) = %+v, %v", page, err)
	}
	page, err = c.Batches.List(ctx, openai.BatchListParams{After: openai.String(b2.ID), Limit: openai.Int(5)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b1.ID || page.HasMore {
		t.Fatalf("List(after) = %+v, %v", page, err)
	}
	files, err := c.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(files.Data) != 5 { // 2 inputs, 2 outputs, 1 error file
		t.Fatalf("Files.List: %d files, %v", len(files.Data), err)
	}
	del, err := c.Files.Delete(ctx, b1.InputFileID)
	if err != nil || !del.Deleted {
		t.Fatalf("Files.Delete: %+v, %v", del, err)
	}
	if _, err := c.Files.Get(ctx, b1.InputFileID); err == nil {
		t.Fatal("a deleted file is still there")
	}
}

func TestBatchMalformedFails(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{}, sim.Config{})
	c := g.client("")
	input := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"sim","messages":[]}}
not json
{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}
{"custom_id":"c","method":"GET","url":"/v1/embeddings","body":{}}
{"method":"POST","url":"/v1/chat/completions","body":[]}
`
	b := waitBatch(t, c, submitBatch(t, c, []byte(input)).ID)
	if b.Status != openai.BatchStatusFailed || b.FailedAt == 0 {
		t.Fatalf("status %s, want failed", b.Status)
	}
	got := map[string]int64{}
	for _, e := range b.Errors.Data {
		got[e.Code] = e.Line
	}
	want := map[string]int64{"invalid_json_line": 2, "duplicate_custom_id": 3, "invalid_method": 4, "invalid_url": 4, "missing_custom_id": 5, "invalid_body": 5}
	for code, line := range want {
		if got[code] != line {
			t.Errorf("error %s on line %d, want %d (errors %+v)", code, got[code], line, b.Errors.Data)
		}
	}
	if b.OutputFileID != "" || b.RequestCounts.Completed != 0 {
		t.Errorf("a failed batch ran lines: %+v", b)
	}
}

func TestBatchLineLimit(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{BatchMaxLines: 5}, sim.Config{})
	c := g.client("")
	b := waitBatch(t, c, submitBatch(t, c, batchInput(6, nil)).ID)
	if b.Status != openai.BatchStatusFailed || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "too_many_requests" || b.Errors.Data[0].Line != 6 {
		t.Fatalf("batch %s, errors %+v", b.Status, b.Errors.Data)
	}
}

func TestBatchCancel(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{BatchConcurrency: 2}, sim.Config{Latency: 20 * time.Millisecond})
	c := g.client("")
	const n = 200
	b := submitBatch(t, c, batchInput(n, nil))
	for {
		got, err := c.Batches.Get(context.Background(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.RequestCounts.Completed > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cb, err := c.Batches.Cancel(context.Background(), b.ID)
	if err != nil || cb.Status != openai.BatchStatusCancelling || cb.CancellingAt == 0 {
		t.Fatalf("Cancel = %+v, %v", cb, err)
	}
	b = waitBatch(t, c, b.ID)
	if b.Status != openai.BatchStatusCancelled || b.CancelledAt == 0 {
		t.Fatalf("status %s, want cancelled", b.Status)
	}
	out, errs := results(t, c, b, n)
	if len(out) == 0 || len(out) == n {
		t.Fatalf("%d lines ran of %d: want some, not all", len(out), n)
	}
	for id, r := range errs {
		if r.Error == nil || r.Error.Code != "batch_cancelled" || r.Response != nil {
			t.Errorf("%s: %+v", id, r)
		}
	}
	if _, err := c.Batches.Cancel(context.Background(), b.ID); err != nil {
		t.Errorf("cancelling a cancelled batch: %v", err)
	}
}

func TestBatchExpiry(t *testing.T) {
	g := batchGateway(t, t.TempDir(), server.Config{BatchConcurrency: 1, BatchWindow: 1500 * time.Millisecond}, sim.Config{Latency: 20 * time.Millisecond})
	c := g.client("")
	const n = 500
	b := waitBatch(t, c, submitBatch(t, c, batchInput(n, nil)).ID)
	if b.Status != openai.BatchStatusExpired || b.ExpiredAt == 0 {
		t.Fatalf("status %s, want expired", b.Status)
	}
	out, errs := results(t, c, b, n)
	if len(out) == 0 || len(errs) == 0 || int64(len(out)) != b.RequestCounts.Completed {
		t.Fatalf("%d output lines (completed %d), %d error lines", len(out), b.RequestCounts.Completed, len(errs))
	}
	for id, r := range errs {
		if r.Error == nil || r.Error.Code != "batch_expired" {
			t.Errorf("%s: %+v", id, r)
		}
	}
}

// TestBatchResume stops a server in the middle of a batch and starts
// another on the same store: it finishes the batch, each line once.
func TestBatchResume(t *testing.T) {
	dir := t.TempDir()
	const n = 300
	st, err := batchapi.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := server.New(server.Config{Engine: e, Batches: st, BatchConcurrency: 4,
		Backends: map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Latency: 10 * time.Millisecond}), Name: "sim"}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s1)
	defer hs.Close()
	g1 := &gateway{srv: s1, engine: e, url: hs.URL}
	c := g1.client("")
	b := submitBatch(t, c, batchInput(n, nil))
	for {
		got, err := c.Batches.Get(context.Background(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.RequestCounts.Completed >= 20 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.Close()

	g2 := batchGateway(t, dir, server.Config{}, sim.Config{Latency: time.Millisecond})
	c2 := g2.client("")
	b2 := waitBatch(t, c2, b.ID)
	if b2.Status != openai.BatchStatusCompleted || b2.RequestCounts.Completed != n {
		t.Fatalf("resumed batch %s, counts %+v", b2.Status, b2.RequestCounts)
	}
	out, _ := results(t, c2, b2, n)
	if len(out) != n {
		t.Fatalf("%d output lines, want %d", len(out), n)
	}
}

// TestBatchAgentMode runs each line as an agent ("model": "agent:NAME"),
// multi-turn with a tool.
func TestBatchAgentMode(t *testing.T) {
	lookup := tool.Func(tool.Spec{Name: "lookup", Description: "Look up."}, func(context.Context, json.RawMessage) (string, error) {
		return "found", nil
	})
	spec, err := batchagent.NewSpec(batchagent.Def{Model: newSim(t, sim.Config{Seed: 2, ToolTurns: 1}), Task: "{input}",
		Tools: []tool.Tool{lookup}, Priority: batchagent.Interactive})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Agents: map[string]*batchagent.Spec{"finder": spec}, Batches: openStore(t, t.TempDir())})
	c := g.client("")
	const n = 10
	input := bytes.ReplaceAll(batchInput(n, nil), []byte(`"model":"sim"`), []byte(`"model":"agent:finder"`))
	b := waitBatch(t, c, submitBatch(t, c, input).ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != n {
		t.Fatalf("status %s, counts %+v", b.Status, b.RequestCounts)
	}
	out, _ := results(t, c, b, n)
	for id, r := range out {
		var body struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Content string                   `json:"content"`
					Events  []map[string]interface{} `json:"batchagent_events"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(r.Response.Body, &body); err != nil || body.Model != "agent:finder" || len(body.Choices) != 1 || body.Choices[0].Message.Content == "" {
			t.Errorf("%s: body %s", id, r.Response.Body)
		}
		if !strings.Contains(string(r.Response.Body), `"lookup"`) {
			t.Errorf("%s: no tool call in the agent's events: %s", id, r.Response.Body)
		}
	}
}

// TestBatchYieldsToInteractive: on a backend of one slot with a batch's
// lines all waiting for it, a chat completion sent meanwhile is served at
// the next free slot, before the batch's waiting lines (batch class below
// interactive).
func TestBatchYieldsToInteractive(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 4, Latency: 20 * time.Millisecond})
	be := batchagent.Backend{Model: m, Name: "sim"}
	e, err := batchagent.New(batchagent.Config{Backends: map[batchagent.Backend]batchagent.Admission{be: {MaxInflight: 1, FixedInflight: true}}})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, server.Config{Engine: e, Backends: map[string]batchagent.Backend{"sim": be},
		Batches: openStore(t, t.TempDir()), BatchConcurrency: 100})
	c := g.client("")
	const n = 100
	b := submitBatch(t, c, batchInput(n, nil))
	for {
		got, err := c.Batches.Get(context.Background(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.RequestCounts.Completed >= 3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.Chat.Completions.New(context.Background(), userParams("sim", "now")); err != nil {
		t.Fatal(err)
	}
	got, err := c.Batches.Get(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Waited behind the batch's queue, it would come after ~97 lines.
	if got.RequestCounts.Completed > 10 {
		t.Errorf("the interactive request was answered after %d batch lines: want it at the next free slot", got.RequestCounts.Completed)
	}
	if b := waitBatch(t, c, b.ID); b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != n {
		t.Fatalf("batch %s, counts %+v", b.Status, b.RequestCounts)
	}
}
