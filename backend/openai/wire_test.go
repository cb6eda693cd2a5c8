package openai_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// capture is a response recorded from a real server: testdata/wire/DIR/NAME.response
// holds the status line, the headers and the raw body.
type capture struct {
	status int
	header http.Header
	body   []byte
}

func loadCapture(t testing.TB, dir, name string) capture {
	t.Helper()
	raw := readFile(t, "wire", dir, name+".response")
	head, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("%s/%s.response: no blank line after the headers", dir, name)
	}
	lines := strings.Split(string(head), "\r\n")
	proto, rest, _ := strings.Cut(lines[0], " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/") || err != nil {
		t.Fatalf("%s/%s.response: bad status line %q", dir, name, lines[0])
	}
	c := capture{status: status, header: http.Header{}, body: body}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("%s/%s.response: bad header line %q", dir, name, l)
		}
		c.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return c
}

// serve replays c byte for byte: its status, its headers (less the framing
// ones, which the server redoes) and its body.
func (c capture) serve(w http.ResponseWriter) {
	for k, vs := range c.header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive":
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body)
}

// capturedRequest is the part of a captured request body that an
// llm.Request can express.
type capturedRequest struct {
	Model          string         `json:"model"`
	Messages       []llm.Message  `json:"messages"`
	MaxTokens      int            `json:"max_tokens"`
	Temperature    *float64       `json:"temperature"`
	ResponseFormat *capturedFormt `json:"response_format"`
}

type capturedFormt struct {
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// loadRequest returns the llm.Request that produces the captured request,
// and false when the capture's body is one the client cannot send (the
// malformed-body captures).
func loadRequest(t testing.TB, dir, name string) (capturedRequest, *llm.Request, bool) {
	t.Helper()
	var cr capturedRequest
	if err := json.Unmarshal(readFile(t, "wire", dir, name+".request.json"), &cr); err != nil {
		return cr, &llm.Request{Model: "stories", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 8}, false
	}
	req := &llm.Request{Model: cr.Model, Messages: cr.Messages, MaxTokens: cr.MaxTokens, Temperature: cr.Temperature}
	if f := cr.ResponseFormat; f != nil {
		req.Output = &llm.OutputSpec{Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema}
	}
	return cr, req, true
}

func TestWireCaptures(t *testing.T) {
	type want struct {
		resp   *llm.Response // nil when an error is wanted
		class  error
		status int
		msg    string // in the error message
	}
	answer := func(text string, finish llm.FinishReason, u llm.Usage) want {
		return want{resp: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: text}, FinishReason: finish, Usage: u}}
	}
	fail := func(class error, status int, msg string) want { return want{class: class, status: status, msg: msg} }
	const (
		gen    = 1 << iota // replay through Generate
		stream             // replay through Stream
	)
	tests := []struct {
		dir, name string
		via       int
		want      want
	}{
		{"llamacpp", "chat-plain", gen, answer("\"Here,\" Annabyed.\nThe cat was very sm", llm.FinishLength, llm.Usage{PromptTokens: 103, CompletionTokens: 24})},
		{"llamacpp", "chat-stream-usage", stream, answer("\"Here,\" Annack.\nThe", llm.FinishLength, llm.Usage{PromptTokens: 103, CompletionTokens: 16, CachedTokens: 75})},
		// No usage chunk: the final chunk's timings give the counts
		// (prompt_n 35 + cache_n 11, predicted_n 8).
		{"llamacpp", "chat-stream-nousage", stream, answer("\"Here?\" A", llm.FinishLength, llm.Usage{PromptTokens: 46, CompletionTokens: 8, CachedTokens: 11})},
		{"llamacpp", "chat-prefix-2", gen, answer("There was a big, s", llm.FinishLength, llm.Usage{PromptTokens: 1672, CompletionTokens: 8, CachedTokens: 1643})},
		{"llamacpp", "chat-json-schema", gen, answer(`{ "title" : "It's a spector`, llm.FinishLength, llm.Usage{PromptTokens: 114, CompletionTokens: 48, CachedTokens: 43})},
		{"llamacpp", "chat-json-schema-stream", stream, answer(`{ "title" : "It's a spector`, llm.FinishLength, llm.Usage{PromptTokens: 114, CompletionTokens: 48, CachedTokens: 85})},
		{"llamacpp", "err-context-overflow", gen | stream, fail(llm.ErrContextLength, 400, "exceeds the available context size")},
		// llama.cpp serves its one model under any name.
		{"llamacpp", "err-unknown-model", gen, answer(`"Come inside`, llm.FinishLength, llm.Usage{PromptTokens: 42, CompletionTokens: 8, CachedTokens: 15})},
		// A 500 caused by the client's body: permanent (see the package doc).
		{"llamacpp", "err-malformed-body", gen | stream, fail(llm.ErrBadRequest, 500, "parse error")},
		{"llamacpp", "err-bad-messages", gen | stream, fail(llm.ErrBadRequest, 400, "Expected 'messages' to be an array")},

		{"ollama", "chat-plain", gen, answer(`"Hello, Cat! I'm sorry for you. What`, llm.FinishLength, llm.Usage{PromptTokens: 71, CompletionTokens: 24})},
		{"ollama", "chat-stream-usage", stream, answer(`"Hello, Can you help me?`, llm.FinishLength, llm.Usage{PromptTokens: 71, CompletionTokens: 16})},
		{"ollama", "chat-stream-nousage", stream, answer("One day, a little g", llm.FinishLength, llm.Usage{})},
		// Ollama reports no cache counters.
		{"ollama", "chat-prefix-2", gen, answer("The shark was very", llm.FinishLength, llm.Usage{PromptTokens: 512, CompletionTokens: 8})},
		// Cut off at max_tokens: truncated JSON, finish length.
		{"ollama", "chat-json-schema", gen, answer("{ \"title\" : \"I will be your friend, Sara. It is not a small bird.\"\n\n      ", llm.FinishLength, llm.Usage{PromptTokens: 95, CompletionTokens: 48})},
		{"ollama", "chat-json-schema-stream", stream, answer("{ \"title\" : \"I will be your friend, Sara. It is not a sweet.\"\n\n        ", llm.FinishLength, llm.Usage{PromptTokens: 95, CompletionTokens: 48})},
		// Ollama truncates the prompt to num_ctx and answers 200.
		{"ollama", "err-context-overflow", gen, answer("S knee gra", llm.FinishLength, llm.Usage{PromptTokens: 512, CompletionTokens: 8})},
		{"ollama", "err-unknown-model", gen | stream, fail(llm.ErrBadRequest, 404, "model 'no-such-model' not found")},
		{"ollama", "err-malformed-body", gen | stream, fail(llm.ErrBadRequest, 400, "unexpected EOF")},
		{"ollama", "err-bad-messages", gen | stream, fail(llm.ErrBadRequest, 400, "cannot unmarshal string")},
	}
	for _, tt := range tests {
		for _, via := range []int{gen, stream} {
			if tt.via&via == 0 {
				continue
			}
			name := tt.dir + "/" + tt.name + "/generate"
			if via == stream {
				name = tt.dir + "/" + tt.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := loadCapture(t, tt.dir, tt.name)
				captured, req, sendable := loadRequest(t, tt.dir, tt.name)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
						t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
					}
					body, _ := io.ReadAll(r.Body)
					var sent capturedRequest
					if err := json.Unmarshal(body, &sent); err != nil {
						t.Errorf("request body %s: %v", body, err)
					}
					if diff := cmp.Diff(captured, sent, jsonTransformer); sendable && diff != "" {
						t.Errorf("request differs from the captured one (-captured +sent):\n%s", diff)
					}
					c.serve(w)
				}))
				defer srv.Close()
				m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", Flavor: openai.Flavor(tt.dir)})

				var (
					resp *llm.Response
					err  error
				)
				if via == gen {
					resp, err = m.Generate(t.Context(), req)
				} else {
					var events []llm.Event
					events, err = collect(m.Stream(t.Context(), req))
					for i, ev := range events {
						if ev.Type == llm.EventText && ev.Text == "" {
							t.Errorf("event %d is an empty text event", i)
						}
					}
					if err == nil {
						if last := events[len(events)-1]; last.Type != llm.EventDone {
							t.Errorf("last event %+v, want EventDone", last)
						}
						resp = accumulate(events)
					}
				}

				if tt.want.resp != nil {
					if err != nil {
						t.Fatalf("%s = %v, want an answer", tt.name, err)
					}
					// The captures' answer extras (system_fingerprint,
					// llama.cpp's timings) are the passthrough's, tested
					// in server's TestAnswerExtrasVerbatim.
					if diff := cmp.Diff(tt.want.resp, resp, cmpopts.IgnoreFields(llm.Response{}, "Extra")); diff != "" {
						t.Errorf("%s response (-want +got):\n%s", tt.name, diff)
					}
					return
				}
				ae, ok := errors.AsType[*llm.APIError](err)
				if !ok || !errors.Is(err, tt.want.class) || ae.StatusCode != tt.want.status || !strings.Contains(ae.Message, tt.want.msg) {
					t.Errorf("%s error = %#v, want an APIError of class %v, status %d, message containing %q", tt.name, err, tt.want.class, tt.want.status, tt.want.msg)
				}
			})
		}
	}
}

func TestWireQueueDepth(t *testing.T) {
	tests := []struct {
		name    string
		flavor  openai.Flavor
		metrics []byte
		want    llm.QueueDepth
	}{
		{"llama.cpp idle", openai.FlavorLlamaCpp, loadCapture(t, "llamacpp", "metrics").body, llm.QueueDepth{}},
		{"llama.cpp under load", openai.FlavorLlamaCpp, loadCapture(t, "llamacpp", "metrics-under-load").body, llm.QueueDepth{Waiting: 7, Running: 7}},
		// Two engines: the gauges are summed over label sets.
		{"vLLM", openai.FlavorVLLM, readFile(t, "metrics", "vllm.txt"), llm.QueueDepth{Waiting: 12, Running: 48}},
		{"SGLang", openai.FlavorSGLang, readFile(t, "metrics", "sglang.txt"), llm.QueueDepth{Waiting: 5, Running: 31}},
		{"sim uses vLLM's names", openai.FlavorSim, readFile(t, "metrics", "vllm.txt"), llm.QueueDepth{Waiting: 12, Running: 48}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					t.Errorf("probe GET %s, want /metrics", r.URL.Path)
				}
				if got := r.Header.Get("Authorization"); got != "Bearer sk-local" {
					t.Errorf("probe Authorization = %q, want the API key", got)
				}
				w.Header().Set("Content-Type", "text/plain; version=0.0.4")
				_, _ = w.Write(tt.metrics)
			}))
			defer srv.Close()
			m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", Flavor: tt.flavor, APIKey: "sk-local"})
			if !m.Capabilities().QueueProbe {
				t.Errorf("Capabilities().QueueProbe = false, want true")
			}
			got, err := m.QueueDepth(t.Context())
			if err != nil || got != tt.want {
				t.Errorf("QueueDepth() = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestQueueDepthErrors(t *testing.T) {
	metrics404 := loadCapture(t, "llamacpp", "metrics-under-load")
	metrics404.status, metrics404.body = http.StatusNotFound, []byte("404 page not found\n")
	tests := []struct {
		name    string
		cfg     openai.Config // BaseURL and MetricsURL are relative to the test server
		serve   capture
		wantErr error // nil: any error
	}{
		{"ollama has no probe", openai.Config{Flavor: openai.FlavorOllama}, capture{}, openai.ErrNoQueueProbe},
		{"openai has no probe", openai.Config{Flavor: openai.FlavorOpenAI}, capture{}, openai.ErrNoQueueProbe},
		{"generic has no probe", openai.Config{}, capture{}, openai.ErrNoQueueProbe},
		{"not found", openai.Config{Flavor: openai.FlavorVLLM}, metrics404, nil},
		{"other server's metrics", openai.Config{Flavor: openai.FlavorVLLM}, loadCapture(t, "llamacpp", "metrics"), nil},
		{"not Prometheus text", openai.Config{Flavor: openai.FlavorSGLang}, capture{status: 200, body: []byte("{\"ok\": true}\n")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tt.serve.serve(w) }))
			defer srv.Close()
			cfg := tt.cfg
			cfg.BaseURL = srv.URL + "/v1"
			m := newModel(t, cfg)
			got, err := m.QueueDepth(t.Context())
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("QueueDepth() = %+v, %v; want an error (wrapping %v)", got, err, tt.wantErr)
			}
			if m.Capabilities().QueueProbe != (tt.wantErr == nil) {
				t.Errorf("Capabilities().QueueProbe = %v, want %v", m.Capabilities().QueueProbe, tt.wantErr == nil)
			}
		})
	}
}

func TestQueueDepthExplicitMetricsURL(t *testing.T) {
	// A generic server with an explicit MetricsURL on another host: any
	// known gauge pair is read, and the API key is not sent there.
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/custom/metrics" || r.Header.Get("Authorization") != "" {
			t.Errorf("probe GET %s with Authorization %q, want /custom/metrics without", r.URL.Path, r.Header.Get("Authorization"))
		}
		loadCapture(t, "llamacpp", "metrics-under-load").serve(w)
	}))
	defer metrics.Close()
	m := newModel(t, openai.Config{BaseURL: "http://api.invalid/v1", APIKey: "sk-remote", MetricsURL: metrics.URL + "/custom/metrics"})
	got, err := m.QueueDepth(t.Context())
	if want := (llm.QueueDepth{Waiting: 7, Running: 7}); err != nil || got != want {
		t.Errorf("QueueDepth() = %+v, %v; want %+v", got, err, want)
	}
}

// TestCapturesCopied checks that the captures this package replays are
// byte-identical to the shared recordings they were copied from: each file
// under testdata/wire must have the SHA-256 digest that
// testdata/wire/SHA256SUMS (written by sha256sum in the recordings'
// directory) gives it, and every file listed there must be present. It
// reads nothing outside the module, so it runs in a clean clone.
func TestCapturesCopied(t *testing.T) {
	dir := filepath.Join("testdata", "wire")
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != sha256.Size*2 || name == "" {
			t.Fatalf("SHA256SUMS line %d: %q, want \"DIGEST  NAME\"", i+1, line)
		}
		want[name] = sum
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(dir, "README.md"))
	if len(files) < 2 || len(files) != len(want) {
		t.Errorf("%d files under testdata/wire, SHA256SUMS lists %d", len(files), len(want))
	}
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum, ok := want[rel]
		digest := sha256.Sum256(b)
		switch got := hex.EncodeToString(digest[:]); {
		case !ok:
			t.Errorf("testdata/wire/%s is not in SHA256SUMS: not a copied capture", rel)
		case got != sum:
			t.Errorf("testdata/wire/%s has SHA-256 %s, want %s: it differs from the shared capture", rel, got, sum)
		}
		delete(want, rel)
	}
	for name := range want {
		t.Errorf("testdata/wire/%s is listed in SHA256SUMS but missing", name)
	}
}

// sseBodies returns the SSE bodies of the streamed captures, for fuzz seeds.
func sseBodies(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, dir := range []string{"llamacpp", "ollama"} {
		for _, name := range []string{"chat-stream-usage", "chat-stream-nousage", "chat-json-schema-stream"} {
			out = append(out, loadCapture(t, dir, name).body)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "conformance", "*.sse"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
