package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/cli"
)

// startSim runs `batchagent sim serve ARGS --addr 127.0.0.1:0` through
// cli.Main and returns the server's base URL and a function that stops it
// and returns the exit status.
func startSim(t *testing.T, args ...string) (url string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	code := make(chan int, 1) // Main's exit status
	go func() {
		var stdout strings.Builder
		code <- cli.Main(ctx, append([]string{"sim", "serve", "--addr", "127.0.0.1:0"}, args...), &stdout, pw)
		pw.Close()
	}()
	r := bufio.NewReader(pr)
	line, err := r.ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("sim serve: %v (stderr %q)", err, line)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok || !strings.HasPrefix(addr, "http://127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		cancel()
		t.Fatalf("sim serve's first line = %q, want listening on http://127.0.0.1:PORT", line)
	}
	drained := make(chan struct{}) // closed when the rest of stderr is read
	go func() {
		io.Copy(io.Discard, r)
		close(drained)
	}()
	var status int
	stopped := false
	stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			status = <-code
			<-drained
		}
		return status
	}
	t.Cleanup(func() { stop() })
	return addr, stop
}

func TestSimServe(t *testing.T) {
	url, stop := startSim(t, "--seed", "7", "--tool-turns", "0", "--max-seqs", "4")
	body := `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello."}],` +
		`"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST = %d %s (%v), want 200", resp.StatusCode, data, err)
	}
	var c struct {
		Object  string
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []any `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	// --tool-turns 0: an answer, not a tool call.
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" ||
		len(c.Choices[0].Message.ToolCalls) != 0 || c.Choices[0].FinishReason != "stop" || c.Usage.PromptTokens == 0 {
		t.Errorf("answer = %s, want a text chat.completion with usage", data)
	}
	if code := stop(); code != 0 {
		t.Errorf("sim serve exit status after cancel = %d, want 0", code)
	}
}

func TestSimServeAPIKey(t *testing.T) {
	t.Setenv("SIM_TEST_KEY", "sk-cli-secret")
	url, stop := startSim(t, "--api-key-env", "SIM_TEST_KEY")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for key, want := range map[string]int{"": 401, "sk-wrong": 401, "sk-cli-secret": 200} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/v1/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/models with key %q = %d, want %d", key, resp.StatusCode, want)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("exit status = %d, want 0", code)
	}
}

func TestSimServePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr := run(t, t.Context(), "sim", "serve", "--addr", ln.Addr().String())
	if code != 1 {
		t.Errorf("sim serve on a busy port = %d, want 1 (stderr %q)", code, stderr)
	}
}

func TestSimUsageErrors(t *testing.T) {
	t.Setenv("SIM_EMPTY_KEY", "")
	tests := []struct {
		name   string
		args   []string
		want   int
		stderr string // a substring of stderr; empty means any
	}{
		{"no subcommand", []string{"sim"}, 2, ""},
		{"unknown subcommand", []string{"sim", "run"}, 2, ""},
		{"unknown flag", []string{"sim", "serve", "--bogus"}, 2, ""},
		{"bad duration", []string{"sim", "serve", "--decode-step", "fast"}, 2, ""},
		{"negative max seqs", []string{"sim", "serve", "--max-seqs", "-1"}, 2, ""},
		{"unknown fault", []string{"sim", "serve", "--fault", "meteor"}, 2, ""},
		{"corrupt above 1", []string{"sim", "serve", "--corrupt", "2"}, 2, "corrupt = 2, want a value in [0, 1]"},
		{"negative rpm", []string{"sim", "serve", "--rpm", "-1"}, 2, "rpm = -1"},
		{"negative batch delay", []string{"sim", "serve", "--batch-delay", "-1s"}, 2, "batch_delay = -1s"},
		{"empty key variable", []string{"sim", "serve", "--api-key-env", "SIM_EMPTY_KEY"}, 2, ""},
		{"positional", []string{"sim", "serve", "extra"}, 2, ""},
		{"bad address", []string{"sim", "serve", "--addr", "localhost"}, 2, ""},
		{"bad port", []string{"sim", "serve", "--addr", "127.0.0.1:99999"}, 2, ""},
		{"help", []string{"sim", "serve", "-h"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, t.Context(), tt.args...)
			if code != tt.want || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("Main(%q) = %d, stderr %q, want %d and a stderr containing %q", tt.args, code, stderr, tt.want, tt.stderr)
			}
		})
	}
}

// TestSimServeBatchAPI: sim serve mounts the Batch API and its counts.
func TestSimServeBatchAPI(t *testing.T) {
	url, stop := startSim(t, "--batch-delay", "10ms")
	for _, path := range []string{"/v1/batches", "/sim/batch/stats"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s", path, resp.StatusCode, data)
		}
		if path == "/sim/batch/stats" && strings.TrimSpace(string(data)) != `{"batches":0,"lines":0,"duplicate_submissions":0}` {
			t.Errorf("GET %s = %s", path, data)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
}

// TestSimServeProfile checks that --profile sets a server's limits (the
// rpm-limited profile's show in its rate-limit headers), that a flag
// given overrides the profile's value, and that an unknown profile is a
// usage error listing the known ones.
func TestSimServeProfile(t *testing.T) {
	limit := func(args ...string) string {
		t.Helper()
		url, stop := startSim(t, args...)
		defer stop()
		body := `{"model":"m","messages":[{"role":"user","content":"Say hello."}]}`
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST = %d, want 200", resp.StatusCode)
		}
		return resp.Header.Get("x-ratelimit-limit-requests")
	}
	if got := limit("--profile", "rpm-limited", "--tool-turns", "0"); got != "600" {
		t.Errorf("rpm-limited: x-ratelimit-limit-requests = %q, want 600", got)
	}
	if got := limit("--profile", "rpm-limited", "--rpm", "90", "--tool-turns", "0"); got != "90" {
		t.Errorf("rpm-limited --rpm 90: x-ratelimit-limit-requests = %q, want 90 (the flag wins)", got)
	}
	var stdout, stderr strings.Builder
	code := cli.Main(t.Context(), []string{"sim", "serve", "--addr", "127.0.0.1:0", "--profile", "vllm"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `"vllm"`) || !strings.Contains(stderr.String(), "one-slot") {
		t.Errorf("--profile vllm: exit %d, stderr %q, want 2 and an error naming it and the known profiles", code, stderr.String())
	}
}
