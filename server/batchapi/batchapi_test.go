package batchapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/batchagent/batchagent/server/batchapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is an ExecFunc answering each body with its last message's text,
// counting the answers it gave per text.
type echo struct {
	mu    sync.Mutex
	done  map[string]int
	block map[string]bool // texts whose answer waits for ctx to end
}

func (e *echo) exec(ctx context.Context, reqID string, body json.RawMessage) (int, json.RawMessage, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		return 400, json.RawMessage(`{"error":{"message":"bad body","type":"invalid_request_error","param":null,"code":null}}`), fmt.Errorf("bad body")
	}
	text := req.Messages[0].Content
	if req.Model != "echo" {
		return 404, json.RawMessage(`{"error":{"message":"no model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`), fmt.Errorf("no model")
	}
	e.mu.Lock()
	block := e.block[text]
	e.mu.Unlock()
	if block {
		<-ctx.Done()
		return 503, json.RawMessage(`{"error":{"message":"stopped","type":"server_error","param":null,"code":null}}`), ctx.Err()
	}
	e.mu.Lock()
	e.done[text]++
	e.mu.Unlock()
	answer, _ := json.Marshal(map[string]any{"id": reqID, "object": "chat.completion", "model": "echo",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": text}}},
		"usage":   map[string]any{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
	return 200, answer, nil
}

// serve starts a batchapi.Server on st with Exec e, its routes on an
// httptest server whose requests belong to the owner named by their
// Authorization header, and returns the Server and a client.
func serve(t *testing.T, st *batchapi.Store, e *echo) (*batchapi.Server, *openai.Client, func(key string) *openai.Client) {
	t.Helper()
	return serveConfig(t, batchapi.Config{Store: st, Exec: e.exec})
}

// serveConfig is serve with a Config of the caller's.
func serveConfig(t *testing.T, cfg batchapi.Config) (*batchapi.Server, *openai.Client, func(key string) *openai.Client) {
	t.Helper()
	s, err := batchapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range s.Routes() {
		mux.Handle(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(batchapi.WithOwner(r.Context(), r.Header.Get("Authorization"))))
		}))
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.Close()
		s.Stop()
	})
	client := func(key string) *openai.Client {
		c := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		return &c
	}
	return s, client("a"), client
}

func open(t *testing.T, dir string) *batchapi.Store {
	t.Helper()
	st, err := batchapi.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// input returns n lines for model echo, the text of line i "text-i".
func input(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"id-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"echo","messages":[{"role":"user","content":"text-%d"}]}}`+"\n", i, i)
	}
	return b.Bytes()
}

func submit(t *testing.T, c *openai.Client, in []byte) *openai.Batch {
	t.Helper()
	f, err := c.Files.New(t.Context(), openai.FileNewParams{File: openai.File(bytes.NewReader(in), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Batches.New(t.Context(), openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wait polls the batch until until reports true of it.
func wait(t *testing.T, c *openai.Client, id string, until func(*openai.Batch) bool) *openai.Batch {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := c.Batches.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if until(b) {
			return b
		}
	}
	t.Fatalf("batch %s did not get there in time", id)
	return nil
}

func final(b *openai.Batch) bool {
	switch b.Status {
	case openai.BatchStatusCompleted, openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
		return true
	}
	return false
}

// outputIDs returns the custom_ids of a file's lines, in order.
func outputIDs(t *testing.T, c *openai.Client, id string) []string {
	t.Helper()
	resp, err := c.Files.Content(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var ids []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		ids = append(ids, l.CustomID)
	}
	return ids
}

// TestRoundTrip runs a batch through Exec: every line once, the output
// in input order, the usage summed.
func TestRoundTrip(t *testing.T) {
	e := &echo{done: map[string]int{}}
	_, c, _ := serve(t, open(t, t.TempDir()), e)
	const n = 50
	b := wait(t, c, submit(t, c, input(n)).ID, final)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != n || b.RequestCounts.Failed != 0 || b.ErrorFileID != "" {
		t.Fatalf("batch %+v, want %d lines completed", b, n)
	}
	ids := outputIDs(t, c, b.OutputFileID)
	for i := range n {
		if i >= len(ids) || ids[i] != fmt.Sprintf("id-%d", i) {
			t.Fatalf("output ids %v, want id-0 to id-%d in order", ids, n-1)
		}
		if got := e.done[fmt.Sprintf("text-%d", i)]; got != 1 {
			t.Errorf("line %d ran %d times, want once", i, got)
		}
	}
	var raw struct {
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal([]byte(b.RawJSON()), &raw)
	if raw.Usage.InputTokens != 3*n || raw.Usage.OutputTokens != 2*n || raw.Usage.TotalTokens != 5*n {
		t.Fatalf("usage %+v, want %d/%d/%d", raw.Usage, 3*n, 2*n, 5*n)
	}
}

// TestResumeRunsNoLineTwice stops a Server with lines in flight, starts
// another on the same store: it finishes the batch, and no line that
// answered ran again.
func TestResumeRunsNoLineTwice(t *testing.T) {
	dir := t.TempDir()
	const n = 40
	e := &echo{done: map[string]int{}, block: map[string]bool{}}
	for i := n / 2; i < n; i++ {
		e.block[fmt.Sprintf("text-%d", i)] = true
	}
	st := open(t, dir)
	s, c, _ := serve(t, st, e)
	b := submit(t, c, input(n))
	wait(t, c, b.ID, func(b *openai.Batch) bool { return b.RequestCounts.Completed == n/2 })
	s.Stop()
	st.Close()

	e.mu.Lock()
	clear(e.block)
	e.mu.Unlock()
	_, c, _ = serve(t, open(t, dir), e)
	done := wait(t, c, b.ID, final)
	if done.Status != openai.BatchStatusCompleted || done.RequestCounts.Completed != n {
		t.Fatalf("resumed batch %s, %d completed; want completed %d", done.Status, done.RequestCounts.Completed, n)
	}
	if ids := outputIDs(t, c, done.OutputFileID); len(ids) != n {
		t.Fatalf("%d output lines, want %d", len(ids), n)
	}
	for i := range n {
		if got := e.done[fmt.Sprintf("text-%d", i)]; got != 1 {
			t.Errorf("line %d answered %d times, want once", i, got)
		}
	}
}

// TestOwners: a request sees only its owner's files and batches.
func TestOwners(t *testing.T) {
	_, a, client := serve(t, open(t, t.TempDir()), &echo{done: map[string]int{}})
	b := wait(t, a, submit(t, a, input(1)).ID, final)
	other := client("b")
	if _, err := other.Batches.Get(t.Context(), b.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("another owner's batch: %v, want 404", err)
	}
	if _, err := other.Files.Get(t.Context(), b.InputFileID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("another owner's file: %v, want 404", err)
	}
	page, err := other.Batches.List(t.Context(), openai.BatchListParams{})
	if err != nil || len(page.Data) != 0 {
		t.Fatalf("another owner's list: %v, %v; want empty", page, err)
	}
	if got, err := a.Batches.Get(t.Context(), b.ID); err != nil || got.ID != b.ID {
		t.Fatalf("own batch: %v, %v", got, err)
	}
}

// TestHold: a batch whose lines are done at once stays in_progress until
// Config.Hold has passed since its creation, then completes.
func TestHold(t *testing.T) {
	const hold = 800 * time.Millisecond
	e := &echo{done: map[string]int{}}
	_, c, _ := serveConfig(t, batchapi.Config{Store: open(t, t.TempDir()), Exec: e.exec, Hold: hold})
	start := time.Now()
	id := submit(t, c, input(3)).ID
	b := wait(t, c, id, func(b *openai.Batch) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.done) == 3
	})
	if b.Status != openai.BatchStatusInProgress && time.Since(start) < hold {
		t.Fatalf("batch %s with its lines done before the hold, want in_progress", b.Status)
	}
	b = wait(t, c, id, final)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != 3 {
		t.Fatalf("batch %+v, want 3 lines completed", b)
	}
	if took := time.Since(start); took < hold {
		t.Errorf("batch completed after %v, want no sooner than the hold %v", took, hold)
	}
	if _, err := batchapi.New(batchapi.Config{Store: open(t, t.TempDir()), Exec: e.exec, Hold: -time.Second}); err == nil {
		t.Error("New with a negative Hold: no error")
	}
}
