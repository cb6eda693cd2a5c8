package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/config"
)

// chatCompletion posts a non-streamed chat completion for model to url
// and returns the status and the decoded answer.
func chatCompletion(t *testing.T, url, model, text string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decode: %v", model, err)
	}
	return resp.StatusCode, out
}

// TestServeExample opens examples/serve/serve.yaml and asks its backend
// and its agent.
func TestServeExample(t *testing.T) {
	sc, err := config.LoadServe(filepath.Join("..", "..", "examples", "serve", "serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := openGateway(t.Context(), sc, nil, nil, func(string) string { return "" })
	if err != nil {
		t.Fatalf("openGateway: %v", err)
	}
	defer g.close()
	hs := httptest.NewServer(g.srv)
	defer hs.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	if status, out := chatCompletion(t, hs.URL, "sim", "Say hello."); status != 200 {
		t.Errorf("sim: status %d %v, want 200", status, out)
	}
	status, out := chatCompletion(t, hs.URL, "agent:reviewer", "cache.go")
	if status != 200 {
		t.Fatalf("agent:reviewer: status %d %v, want 200", status, out)
	}
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	var findings struct {
		Risk     string
		Findings []any
	}
	if err := json.Unmarshal([]byte(msg["content"].(string)), &findings); err != nil || findings.Risk == "" {
		t.Errorf("agent:reviewer content %v, want the findings JSON (%v)", msg["content"], err)
	}
	if cost, _ := out["usage"].(map[string]any)["cost"].(float64); cost <= 0 {
		t.Errorf("agent:reviewer usage %v, want a cost (the example prices the agent)", out["usage"])
	}
	if events, _ := msg["batchagent_events"].([]any); len(events) < 3 {
		t.Errorf("agent:reviewer events %v, want turns and the read_file call", msg["batchagent_events"])
	}
}

// TestServeCommand runs `batchagent serve --config examples/serve/serve.yaml
// --addr 127.0.0.1:0`, asks it for its models, and stops it.
func TestServeCommand(t *testing.T) {
	stderr := &syncBuffer{}
	a := &app{stdout: io.Discard, stderr: stderr}
	cmd := a.serveCommand()
	dataDir := t.TempDir() // not the default next to the example: tests write nothing into the repository
	cmd.SetArgs([]string{"--config", filepath.Join("..", "..", "examples", "serve", "serve.yaml"), "--addr", "127.0.0.1:0", "--data-dir", dataDir})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1) // the command's result
	go func() { done <- cmd.ExecuteContext(ctx) }()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	deadline := time.Now().Add(10 * time.Second)
	var url string
	for url == "" && time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		time.Sleep(5 * time.Millisecond) // polling the command's output
	}
	if url == "" {
		cancel()
		t.Fatalf("no listening line: %q (%v)", stderr.String(), <-done)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"agent:reviewer"`) || !strings.Contains(string(b), `"sim"`) {
		t.Errorf("models = %s, want sim and agent:reviewer", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve ended with %v (stderr %q), want a clean stop", err, stderr.String())
	}
}

// TestServeDataDirLocked: a second serve on a data directory in use exits
// 2 at once, naming the first; it would run the same batch lines again.
func TestServeDataDirLocked(t *testing.T) {
	dataDir := t.TempDir()
	config := filepath.Join("..", "..", "examples", "serve", "serve.yaml")
	first := &syncBuffer{}
	a := &app{stdout: io.Discard, stderr: first}
	cmd := a.serveCommand()
	cmd.SetArgs([]string{"--config", config, "--addr", "127.0.0.1:0", "--data-dir", dataDir})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(first.String(), "listening on") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("first serve not listening: %q (%v)", first.String(), <-done)
		}
		time.Sleep(5 * time.Millisecond) // polling the command's output
	}
	var second bytes.Buffer
	code := serveGateway(t.Context(), serveFlags{config: config, addr: "127.0.0.1:0", dataDir: dataDir}, slog.New(slog.DiscardHandler), &second)
	if code != exitUsage || !strings.Contains(second.String(), "in use by another run") || !strings.Contains(second.String(), fmt.Sprint("pid ", os.Getpid())) {
		t.Errorf("second serve: exit %d, %q; want exit %d naming the first", code, second.String(), exitUsage)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("first serve ended with %v", err)
	}
}
