package config_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
)

// noEnv is an environment with nothing set.
func noEnv(string) string { return "" }

// TestOpenBackendPlainHTTP checks that a plain http:// URL, as people
// write a local server's address, opens an OpenAI-compatible backend that
// sends the job's model to that address's /v1/chat/completions.
func TestOpenBackendPlainHTTP(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex // protects seen
		seen []string   // "path model" of each request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+req.Model)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name, url, model string
		want             string // "path model" the server saw
	}{
		{"with /v1", srv.URL + "/v1", "qwen-7b", "/v1/chat/completions qwen-7b"},
		{"bare host", srv.URL, "llama", "/v1/chat/completions llama"},
		{"other path", srv.URL + "/api/v1", "m", "/api/v1/chat/completions m"},
		{"model in query", srv.URL + "/v1?model=from-url", "job-model", "/v1/chat/completions from-url"},
		{"spaces around", "  " + srv.URL + "/v1 ", "m", "/v1/chat/completions m"},
		{"upper-case scheme", strings.Replace(srv.URL, "http://", "HTTP://", 1) + "/v1", "m", "/v1/chat/completions m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := config.OpenBackend(t.Context(), tt.url, tt.model, "", noEnv)
			if err != nil {
				t.Fatalf("OpenBackend(%q) error: %v", tt.url, err)
			}
			resp, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}})
			if err != nil {
				t.Fatalf("Generate on %q: %v", tt.url, err)
			}
			if resp.Message.Content != "hi" {
				t.Errorf("Generate on %q = %q, want %q", tt.url, resp.Message.Content, "hi")
			}
			mu.Lock()
			got := seen[len(seen)-1]
			mu.Unlock()
			if got != tt.want {
				t.Errorf("OpenBackend(%q, model %q): server saw %q, want %q", tt.url, tt.model, got, tt.want)
			}
		})
	}
}

// TestOpenBackendBadURL checks the errors of backend URLs people get
// wrong: a misspelt scheme gets the nearest one, an address without a
// scheme gets a URL, and no error repeats a key the URL holds.
func TestOpenBackendBadURL(t *testing.T) {
	t.Parallel()
	const secret = "sk-SECRET123"
	tests := []struct {
		url  string
		want string // a part of the error
	}{
		{"opneai://", `unsupported scheme "opneai" (did you mean "openai"?)`},
		{"anthropc://", `(did you mean "anthropic"?)`},
		{"olama://localhost", `(did you mean "ollama"?)`},
		{"vlm://localhost:8000", `(did you mean "vllm"?)`},
		{"htp://localhost:8000/v1", `(did you mean "http"?)`},
		{"htps://api.example.com/v1", `(did you mean "https"?)`},
		{"openai+htp://h/v1", `(did you mean "openai+http"?)`},
		{"smi://", `(did you mean "sim"?)`},
		{"zzzzzzzz://h", `unsupported scheme "zzzzzzzz" (supported: sim, sim+http, http, https, openai`},
		{"", "backend: empty URL"},
		{"   ", "backend: empty URL"},
		{"localhost:8000/v1", `URL has no scheme (did you mean "http://localhost:8000/v1"?`},
		{"//gpu-box:8000/v1", `URL has no scheme (did you mean "http://gpu-box:8000/v1"?`},
		{"/v1/chat", "URL has no scheme, as in http://localhost:8000/v1"},
		{"127.0.0.1:8000/v1", "a URL starts with its scheme, as in http://HOST:PORT/v1"},
		{"http:/localhost:8000", "backend http://: no host: write http://HOST:PORT/v1"},
		{"https:host", "backend https://: no host"},
		{"http://", "no host"},
		{"http://local host:8000/v1", `invalid character " " in host name`},
		{"http://h/v1?api_key=" + secret, `unknown parameter "api_key"`},
		{"http://user:" + secret + "@h/v1", "credentials in the URL"},
		{"htp://h/v1?key=" + secret, `(did you mean "http"?)`},
		{"localhost:8000/v1?key=" + secret, `did you mean "http://localhost:8000/v1"?`},
		{"127.0.0.1:8000/v1?key=" + secret, "a URL starts with its scheme"},
		{"opneai://?key=" + secret, `(did you mean "openai"?)`},
		{"http://h/v1#" + secret, "unexpected fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			_, err := config.OpenBackend(t.Context(), tt.url, "m", "", noEnv)
			if err == nil {
				t.Fatalf("OpenBackend(%q) = nil error, want one with %q", tt.url, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenBackend(%q) error = %q, want it to contain %q", tt.url, err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("OpenBackend(%q) error = %q: it holds the URL's key", tt.url, err)
			}
		})
	}
}

// TestParsePlainHTTPBackend checks that a job file may name its backend
// with a plain http(s):// URL.
func TestParsePlainHTTPBackend(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://localhost:8000/v1", "https://api.example.com/v1"} {
		in := "task: x\nmodel: m\nbackend: " + u + "\n"
		j, err := config.Parse([]byte(in), "job.yaml", t.TempDir())
		if err != nil {
			t.Fatalf("Parse(%q) = %v, want no error", in, err)
		}
		if j.Backend != u {
			t.Errorf("Parse(%q) backend = %q, want %q", in, j.Backend, u)
		}
	}
}
