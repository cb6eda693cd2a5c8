package cli_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
)

// TestRunStoresNoSecret runs a job against a server that rejects the key
// and echoes it upper-cased and base64-encoded (as an HTTP Basic
// credential), along with the request path, which holds a token of the
// backend URL: neither may reach the output file, the state file or
// stderr, in any form backendtest.Leak knows.
func TestRunStoresNoSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		msg := "invalid api key " + strings.ToUpper(key) + " (Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+key)) +
			", " + base64.RawURLEncoding.EncodeToString([]byte(key)) + ") for " + r.Method + " " + r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	}))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", backendtest.APIKey)

	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "task: \"Say hello to {id}\"\n")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	out := filepath.Join(dir, "out.jsonl")
	state := filepath.Join(dir, "run.state.db")
	backend := "openai+http://" + strings.TrimPrefix(srv.URL, "http://") + "/" + backendtest.PathToken + "/v1"
	// A real child process: what it writes to its files, stdout and stderr
	// is what a user would see.
	code, stdout, stderr := runProcess(t, dir, "run", job, "--inputs", in, "--out", out, "--state", state, "--backend", backend)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (every input failed); stderr:\n%s", code, stderr)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, string(b))
	if len(lines) != 2 {
		t.Fatalf("%d result lines, want 2:\n%s", len(lines), b)
	}
	for _, l := range lines {
		// The server's words are kept, its echo of the secrets is not.
		if l.Error == nil || !strings.Contains(l.Error.Message, "invalid api key [REDACTED]") {
			t.Errorf("line %d: error %+v, want the server's message with the key redacted", l.Index, l.Error)
		}
	}
	texts := map[string]string{"out.jsonl": string(b), "stdout": stdout, "stderr": stderr}
	// The state file, and the write-ahead log SQLite may keep beside it.
	files, err := filepath.Glob(state + "*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no state file at %s (%v)", state, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Base(f)] = string(b)
	}
	if !strings.Contains(texts[filepath.Base(state)], "invalid api key") {
		t.Errorf("the state file holds no error message: the test cannot see a leak there")
	}
	for name, text := range texts {
		if what := backendtest.Leak(text); what != "" {
			t.Errorf("%s shows the %s", name, what)
		}
	}
}

// TestBadBackendURLShowsNoSecret gives backend URLs that are refused and
// hold a token in their path or query: the error names the backend without
// showing the token.
func TestBadBackendURLShowsNoSecret(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "task: \"Say hello to {id}\"\n")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	tok := backendtest.PathToken
	for _, backend := range []string{
		"openai+http://127.0.0.1:1/" + tok + "/v1?unknown=1",
		"openai+http://127.0.0.1:1/" + tok + "/v1#frag",
		"vllm://127.0.0.1:1/" + tok + "?unknown=1",
		"openai://api.example.com/" + tok,
		"openai:///" + tok,
		"anthropic+http://127.0.0.1:1/" + tok + "?max_tokens=x",
		"anthropic://h/" + tok,
		"sim+http://127.0.0.1:1/" + tok + "?model=a&x=" + tok,
		"bedrock://us-east-1/" + tok + "?endpoint=http://h/" + tok + "%3Fq",
		"bedrock://us-east-1?endpoint=http://h/" + tok + "?q=1",
		"nosuch://h/" + tok,
	} {
		t.Run(backend, func(t *testing.T) {
			code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--no-state", "--backend", backend)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (refused backend URL); stderr:\n%s", code, stderr)
			}
			if what := backendtest.Leak(stdout + stderr); what != "" {
				t.Errorf("the error shows the %s:\n%s", what, stderr)
			}
			if !strings.Contains(stderr, "backend") {
				t.Errorf("stderr %q does not name the backend", stderr)
			}
		})
	}
}
