package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name    string
		cfg     bedrock.Config
		wantErr string
	}{
		{"negative max tokens", bedrock.Config{Region: "us-east-1", MaxTokens: -1}, "max tokens -1"},
		{"negative concurrency", bedrock.Config{Region: "us-east-1", Concurrency: -2}, "concurrency -2"},
		{"bad region", bedrock.Config{Region: "us east 1"}, "invalid region"},
		{"bad endpoint", bedrock.Config{Region: "us-east-1", Endpoint: "ftp://x"}, "not an http(s) URL"},
		{"endpoint with credentials", bedrock.Config{Region: "us-east-1", Endpoint: "https://AKID:sk-pw@vpce.example"}, "credentials"},
		{"unparsable endpoint with credentials", bedrock.Config{Region: "us-east-1", Endpoint: "https://AKID:sk-pw@vpce.example:port"}, "not an http(s) URL"},
		{"relative endpoint with a secret", bedrock.Config{Region: "us-east-1", Endpoint: "vpce.example/sk-pw"}, "not an http(s) URL"},
		{"endpoint with a query", bedrock.Config{Region: "us-east-1", Endpoint: "https://vpce.example/?token=sk-pw"}, "https://vpce.example has a query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := bedrock.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New(%+v) = %v, %v, want an error containing %q", tt.cfg, m, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "sk-pw") {
				t.Errorf("New(%+v) error %q repeats a credential", tt.cfg, err)
			}
		})
	}
}

// isolateAWS points the default AWS configuration at nothing.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	} {
		t.Setenv(k, v)
	}
}

func TestNewDefaultChain(t *testing.T) {
	isolateAWS(t)
	if m, err := bedrock.New(t.Context(), bedrock.Config{}); err == nil || !strings.Contains(err.Error(), "no region") {
		t.Errorf("New(zero Config, no AWS region) = %v, %v, want a no region error", m, err)
	}

	// Region, credentials and retry settings from the environment: the
	// SDK's retries stay off.
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", backendtest.APIKey)
	t.Setenv("AWS_MAX_ATTEMPTS", "5")
	t.Setenv("AWS_RETRY_MODE", "standard")
	var requests atomic.Int64
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "busy")
	}))
	defer srv.Close()
	m, err := bedrock.New(t.Context(), bedrock.Config{Endpoint: srv.URL, Model: "test-model"})
	if err != nil {
		t.Fatalf("New(zero Config, AWS_REGION set) = %v, want no error", err)
	}
	if _, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain)); !errors.Is(err, llm.ErrOverloaded) {
		t.Errorf("Generate() = %v, want ErrOverloaded", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("Generate() made %d requests with AWS_MAX_ATTEMPTS=5, want 1", n)
	}
	if a, _ := auth.Load().(string); !strings.Contains(a, "Credential=AKIDENV/") || !strings.Contains(a, "/eu-west-3/bedrock/") {
		t.Errorf("Authorization = %q, want a signature by AKIDENV in eu-west-3", a)
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		name string
		cfg  bedrock.Config
		want llm.Capabilities
	}{
		{"defaults", bedrock.Config{}, llm.Capabilities{Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, DefaultConcurrency: bedrock.DefaultConcurrency, Media: llm.Media{Image: true, File: true, Billing: "anthropic"}}},
		{"tuned", bedrock.Config{Concurrency: 16, DisableCachePoints: true}, llm.Capabilities{Streaming: true, NativeTools: true, NativeJSONSchema: true, DefaultConcurrency: 16, Media: llm.Media{Image: true, File: true, Billing: "anthropic"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := newModelWith(t, tt.cfg).Capabilities()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadRequests checks requests refused before anything is sent.
func TestBadRequests(t *testing.T) {
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests++ }))
	defer srv.Close()
	m := newModel(t, srv.URL) // no default model
	noModel := backendtest.Request(backendtest.Plain)
	noModel.Model = ""
	badSchema := backendtest.Request(backendtest.ToolCall)
	badSchema.Tools = []llm.ToolDef{{Name: "broken", Parameters: json.RawMessage(`{"type":`)}}
	trailing := backendtest.Request(backendtest.Structured)
	trailing.Output = &llm.OutputSpec{Schema: json.RawMessage(`{} {}`)}
	tests := []struct {
		name    string
		req     *llm.Request
		wantMsg string
	}{
		{"no model", noModel, "no model"},
		{"bad tool schema", badSchema, `tool "broken"`},
		{"two schemas", trailing, `tool "output"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, genErr := m.Generate(t.Context(), tt.req)
			var streamErr error
			for _, err := range m.Stream(t.Context(), tt.req) {
				streamErr = err
			}
			for op, err := range map[string]error{"Generate": genErr, "Stream": streamErr} {
				if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("%s(%s) = %v, want ErrBadRequest mentioning %q", op, tt.name, err, tt.wantMsg)
				}
			}
		})
	}
	if requests != 0 {
		t.Errorf("%d requests reached the server, want 0", requests)
	}
}

// TestStreamAnswers checks streams beyond the conformance suite's.
func TestStreamAnswers(t *testing.T) {
	structured := backendtest.Request(backendtest.Structured)
	tests := []struct {
		name   string
		req    *llm.Request
		frames func(t testing.TB) [][]byte
		want   *llm.Response
	}{
		{"structured answered in text", structured, func(t testing.TB) [][]byte {
			return [][]byte{messageStart(t), textDelta(t, 0, `{"n":`), textDelta(t, 0, `4}`), messageStop(t, "end_turn"), metadata(t)}
		}, &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: `{"n":4}`}, FinishReason: llm.FinishStop, Usage: backendtest.PlainUsage}},
		{"structured tool without input", structured, func(t testing.TB) [][]byte {
			return [][]byte{messageStart(t), toolStart(t, 0, "t1", "answer"), blockStop(t, 0), messageStop(t, "tool_use")}
		}, &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: `{}`}, FinishReason: llm.FinishStop}},
		{"truncated by max tokens", backendtest.Request(backendtest.Plain), func(t testing.TB) [][]byte {
			return [][]byte{messageStart(t), textDelta(t, 0, "Hel"), messageStop(t, "max_tokens"), metadata(t)}
		}, &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "Hel"}, FinishReason: llm.FinishLength, Usage: backendtest.PlainUsage}},
		{"call without arguments, stray fragment", backendtest.Request(backendtest.ToolCall), func(t testing.TB) [][]byte {
			return [][]byte{messageStart(t), toolDelta(t, 3, `{"x":1}`), toolStart(t, 0, "c1", "list"), blockStop(t, 0), messageStop(t, "tool_use")}
		}, &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "list", Arguments: json.RawMessage("{}")}}}, FinishReason: llm.FinishToolCalls}},
		{"unknown event", backendtest.Request(backendtest.Plain), func(t testing.TB) [][]byte {
			return [][]byte{messageStart(t), frame(t, "somethingNew", `{}`), textDelta(t, 0, "Hi"), messageStop(t, "end_turn")}
		}, &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "Hi"}, FinishReason: llm.FinishStop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body []byte
			for _, f := range tt.frames(t) {
				body = append(body, f...)
			}
			m := newModelWith(t, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: cannedClient(body)})
			var (
				acc  llm.Accumulator
				last llm.EventType
			)
			for ev, err := range m.Stream(t.Context(), tt.req) {
				if err != nil {
					t.Fatalf("Stream(%s) error = %v", tt.name, err)
				}
				acc.Add(ev)
				last = ev.Type
			}
			if last != llm.EventDone {
				t.Errorf("Stream(%s) last event %v, want EventDone", tt.name, last)
			}
			if diff := cmp.Diff(tt.want, acc.Response()); diff != "" {
				t.Errorf("Stream(%s) response (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

// TestStreamBreak checks that breaking out of the loop releases the
// connection: the server sees its client go away.
func TestStreamBreak(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fixture(t, backendtest.Cancel, true).ServeHTTP(w, r) // returns when the client is gone
		close(gone)
	}))
	defer srv.Close()
	m := newModel(t, srv.URL)
	events := 0
	for _, err := range m.Stream(t.Context(), backendtest.Request(backendtest.Cancel)) {
		if err != nil {
			t.Fatalf("Stream() error = %v before the break", err)
		}
		events++
		break
	}
	if events != 1 {
		t.Errorf("Stream() yielded %d events before the break, want 1", events)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still serves the stream 5s after the consumer broke out")
	}
}

// TestGenerateAnswers checks Converse answers beyond the conformance
// suite's.
func TestGenerateAnswers(t *testing.T) {
	tests := []struct {
		name string
		req  *llm.Request
		body string
		want *llm.Response
	}{
		{"structured answered in text", backendtest.Request(backendtest.Structured),
			`{"output":{"message":{"role":"assistant","content":[{"text":"{\"n\":4}"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5}}`,
			&llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: `{"n":4}`}, FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 2}}},
		{"structured among text", backendtest.Request(backendtest.Structured),
			`{"output":{"message":{"role":"assistant","content":[{"text":"Here."},{"toolUse":{"toolUseId":"t","name":"answer","input":{"n":3,"a":[1.5,null,true]}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5,"cacheWriteInputTokens":100}}`,
			&llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: `{"a":[1.5,null,true],"n":3}`}, FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 103, CompletionTokens: 2, CacheWriteTokens: 100}}},
		{"length", backendtest.Request(backendtest.Plain),
			`{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hmm"}}},{"text":"Hel"}]}},"stopReason":"max_tokens","usage":{"inputTokens":3,"outputTokens":64,"totalTokens":67}}`,
			&llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "Hel"}, FinishReason: llm.FinishLength, Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 64}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			got, err := newModel(t, srv.URL).Generate(t.Context(), tt.req)
			if err != nil {
				t.Fatalf("Generate(%s) = %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Generate(%s) mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

// TestConcurrentUse runs calls of one Model in parallel (for the race
// detector).
func TestConcurrentUse(t *testing.T) {
	srv := httptest.NewServer(fixture(t, backendtest.Plain, false))
	defer srv.Close()
	m := newModel(t, srv.URL)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, 8) // one per caller
	for range 8 {
		go func() {
			resp, err := m.Generate(ctx, backendtest.Request(backendtest.Plain))
			if err == nil && resp.Message.Content != backendtest.PlainText {
				err = errors.New("content " + resp.Message.Content)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Generate() = %v", err)
		}
	}
}
