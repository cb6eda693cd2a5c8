package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/agent"
	backendopenai "github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
)

// bodies keeps the request bodies the simulator received.
type bodies struct {
	next http.Handler
	mu   sync.Mutex // protects got
	got  [][]byte
}

func (b *bodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.got = append(b.got, body)
	b.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.next.ServeHTTP(w, r)
}

// mediaServer starts the HTTP simulator (one tool turn) behind a body
// recorder and returns a model of the given flavor speaking to it.
func mediaServer(t *testing.T, flavor backendopenai.Flavor) (llm.Model, *bodies) {
	t.Helper()
	s, err := simhttp.New(simhttp.Config{Model: sim.Config{ToolTurns: 1, Seed: 1},
		PrefillPerToken: time.Nanosecond, DecodeStep: time.Microsecond, DecodeStepPerSeq: time.Nanosecond})
	if err != nil {
		t.Fatalf("simhttp.New = %v", err)
	}
	rec := &bodies{next: s}
	hs := httptest.NewServer(rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // Run's result
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simhttp Run = %v", err)
		}
	})
	m, err := backendopenai.New(backendopenai.Config{BaseURL: hs.URL + "/v1", Flavor: flavor, HTTPClient: hs.Client()})
	if err != nil {
		t.Fatalf("openai.New = %v", err)
	}
	return m, rec
}

// readFilePool returns a pool with read_file over a directory holding
// photos/cat.png (a 40×30 PNG) and docs/invoice.pdf (one page).
func readFilePool(t *testing.T) *tool.Pool {
	t.Helper()
	dir := t.TempDir()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 40, 30))); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"photos/cat.png":   img.Bytes(),
		"docs/invoice.pdf": []byte("%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"),
	}
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rf, err := filetool.ReadFile(filetool.ReadFileConfig{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rf.(io.Closer).Close() })
	p, err := tool.NewPool([]tool.Tool{rf}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wireMessage is a chat message of a request body, content as sent.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
}

// requestMessages decodes the messages of a request body.
func requestMessages(t *testing.T, body []byte) []wireMessage {
	t.Helper()
	var req struct {
		Messages []wireMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	return req.Messages
}

// TestToolMediaReachesModel: an agent whose model takes images calls
// read_file on a PNG, and the next request carries the image, as a data
// URL, in the message after the tool's.
func TestToolMediaReachesModel(t *testing.T) {
	m, rec := mediaServer(t, backendopenai.FlavorSim)
	r := newRunner(t, agent.Config{Model: m, Tools: readFilePool(t), MaxTurns: 4})
	st := start("Describe the photo. path: photos/cat.png")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatalf("Run = %v, want success", err)
	}
	if st.ToolCalls != 1 || st.ToolErrors != 0 {
		t.Fatalf("tool calls %d, tool errors %d; want 1 and 0", st.ToolCalls, st.ToolErrors)
	}
	var toolMsg *llm.Message
	for i := range st.Messages {
		if st.Messages[i].Role == llm.RoleTool {
			toolMsg = &st.Messages[i]
		}
	}
	if toolMsg == nil || len(toolMsg.Parts) != 2 || toolMsg.Parts[1].Kind != llm.PartImage || toolMsg.Parts[1].Ref != "photos/cat.png" {
		t.Fatalf("tool message = %+v, want a text part and the image photos/cat.png", toolMsg)
	}
	if got, want := toolMsg.Parts[0].Text, "photos/cat.png: image/png, 40×30"; got != want {
		t.Errorf("tool message text = %q, want %q", got, want)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 2 {
		t.Fatalf("server received %d requests, want 2", len(rec.got))
	}
	second := string(rec.got[1])
	for _, want := range []string{`"image_url"`, `data:image/png;base64,`, `photos/cat.png: image/png, 40×30`} {
		if !strings.Contains(second, want) {
			t.Errorf("second request lacks %s:\n%.2000s", want, second)
		}
	}
	if strings.Contains(string(rec.got[0]), `"image_url"`) {
		t.Errorf("first request carries an image before the tool ran")
	}
}

// TestToolMediaRefused: a model that takes no documents gets read_file's
// PDF as a tool error naming the reason, counted as a tool error; the
// agent goes on to its answer, and no file part is sent.
func TestToolMediaRefused(t *testing.T) {
	m, rec := mediaServer(t, backendopenai.FlavorVLLM) // images only
	r := newRunner(t, agent.Config{Model: m, Tools: readFilePool(t), MaxTurns: 4})
	st := start("Read the invoice. path: docs/invoice.pdf")
	if err := r.Run(t.Context(), st); err != nil {
		t.Fatalf("Run = %v, want success", err)
	}
	if st.ToolCalls != 1 || st.ToolErrors != 1 || st.Output == nil {
		t.Fatalf("tool calls %d, tool errors %d, output %s; want 1, 1 and an answer", st.ToolCalls, st.ToolErrors, st.Output)
	}
	const want = "error: read_file: docs/invoice.pdf is a document (application/pdf); the model takes no file parts"
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 2 {
		t.Fatalf("server received %d requests, want 2", len(rec.got))
	}
	msgs := requestMessages(t, rec.got[1])
	var content string
	for _, msg := range msgs {
		if msg.Role == "tool" {
			if err := json.Unmarshal(msg.Content, &content); err != nil {
				t.Fatalf("tool message content %s: %v", msg.Content, err)
			}
		}
	}
	if content != want {
		t.Errorf("tool message sent = %q, want %q", content, want)
	}
	if strings.Contains(string(rec.got[1]), `"file"`) || strings.Contains(string(rec.got[1]), "JVBER") {
		t.Errorf("second request carries the PDF:\n%.2000s", rec.got[1])
	}
}
