package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

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
	// What it serves is on stderr before the first request is answered:
	// one line each, the backend as scheme://host:port (no query).
	for _, want := range []string{
		"  model \"sim\": passthrough to sim://\n",
		"  model \"agent:reviewer\": agent on sim://, tools read_file\n",
		"  batch API: /v1/files, /v1/batches (data in " + dataDir + ")\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "latency=") {
		t.Errorf("stderr shows a backend URL's query:\n%s", stderr.String())
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

// syncBuffer is a bytes.Buffer safe for concurrent writers and the test.
type syncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
