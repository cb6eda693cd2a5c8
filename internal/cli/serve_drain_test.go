package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestServeDrain (issue 27, defect 6) sends SIGTERM to a real `batchagent
// serve` while a stream is in flight and a second request waits for the
// backend's only slot: /health turns 503 at once, the waiting request is
// answered 503 with Retry-After, the stream completes whole, and the
// process exits 0.
func TestServeDrain(t *testing.T) {
	// 200 ms a token: A (a short answer of the simulator's, about 15 tokens)
	// holds the slot for seconds, so that B is seen waiting on a loaded
	// machine too (at 40 ms A ended first in CI, at load 30).
	up, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: 1, ToolTurns: -1}, DecodeStep: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = up.Run(ctx) })
	upstream := httptest.NewServer(up)
	defer func() { upstream.Close(); cancel(); wg.Wait() }()

	dir := t.TempDir()
	config := writeFile(t, dir, "serve.yaml", fmt.Sprintf(`shutdown_grace: 30s
backends:
  sim:
    url: sim+%s
    max_inflight: 1
    fixed_inflight: true
`, upstream.URL))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{"serve", "--config", config, "--addr", "127.0.0.1:0", "--data-dir", dir}, "\x1f"))
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == ""; {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve not listening: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the child's output
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	// A: a long stream, in flight once its first content arrives.
	body := `{"model":"sim","stream":true,"max_tokens":60,"messages":[{"role":"user","content":"Tell a long story."}]}`
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	var stream []string
	content := regexp.MustCompile(`"content":"[^"]`)
	for lines.Scan() {
		if lines.Text() != "" {
			stream = append(stream, lines.Text())
		}
		if content.MatchString(lines.Text()) {
			break
		}
	}

	// B: waits for the slot A holds.
	type answer struct {
		status     int
		retryAfter string
		err        error
	}
	waited := make(chan answer, 1)
	go func() {
		r, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			waited <- answer{err: err}
			return
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		waited <- answer{status: r.StatusCode, retryAfter: r.Header.Get("Retry-After")}
	}()
	inFlight := regexp.MustCompile(`batchagent_http_requests_in_flight\{route="/v1/chat/completions"\} 2`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := client.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if inFlight.Match(m) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second request never reached the gateway:\n%s", m)
		}
		time.Sleep(10 * time.Millisecond) // polling the gateway's gauge
	}
	if s := up.Stats(); s.Running != 1 {
		t.Fatalf("upstream running %d, want A alone", s.Running)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := <-waited
	if got.err != nil || got.status != http.StatusServiceUnavailable || got.retryAfter == "" {
		t.Errorf("waiting request: status %d Retry-After %q (%v), want 503 with Retry-After", got.status, got.retryAfter, got.err)
	}
	// The drain has begun: /health says so while A finishes.
	r, err := client.Get(url + "/health")
	if err != nil {
		t.Fatalf("/health during the drain: %v", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health during the drain: %d, want 503", r.StatusCode)
	}
	for lines.Scan() {
		if lines.Text() != "" {
			stream = append(stream, lines.Text())
		}
	}
	if n := len(stream); n < 3 || stream[n-1] != "data: [DONE]" || !strings.Contains(stream[n-2], `"finish_reason":"`) {
		t.Errorf("stream A ended %q, want a finish chunk then [DONE]", stream[max(0, n-3):])
	}
	for _, l := range stream {
		if strings.Contains(l, `"error"`) {
			t.Errorf("stream A holds an error: %s", l)
		}
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exited %d (%v), want 0 after a drain asked by SIGTERM; stderr:\n%s", code, err, stderr.String())
	}
}
