package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// sentBody runs req through Generate (or Stream) against a server that
// answers the plain fixture, and returns the request body sent.
func sentBody(t *testing.T, cfg openai.Config, req *llm.Request, stream bool) []byte {
	t.Helper()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(readFile(t, "conformance", "plain.sse"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(readFile(t, "conformance", "plain.json"))
	}))
	defer srv.Close()
	cfg.BaseURL = srv.URL + "/v1"
	m := newModel(t, cfg)
	var err error
	if stream {
		_, err = collect(m.Stream(t.Context(), req))
	} else {
		_, err = m.Generate(t.Context(), req)
	}
	if err != nil {
		t.Fatalf("call = %v", err)
	}
	return body
}

// TestRequestGolden pins the exact body sent for a request with a tool
// round trip and structured output; -update rewrites the golden files.
func TestRequestGolden(t *testing.T) {
	temp := 0.25
	tests := []struct {
		golden string
		flavor openai.Flavor
		stream bool
	}{
		{"request.golden", openai.FlavorVLLM, false},
		{"request_openai_stream.golden", openai.FlavorOpenAI, true},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			req := backendtest.Request(backendtest.ToolResult)
			req.Output = backendtest.OutputSpec
			req.Temperature = &temp
			body := sentBody(t, openai.Config{Flavor: tt.flavor, APIKey: backendtest.APIKey}, req, tt.stream)
			var got bytes.Buffer
			if err := json.Indent(&got, body, "", "  "); err != nil {
				t.Fatalf("request body %s: %v", body, err)
			}
			got.WriteByte('\n')
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readFile(t, tt.golden)
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("request body:\n%s\nwant (%s):\n%s", got.Bytes(), path, want)
			}
		})
	}
}

func TestRequestSchemasVerbatim(t *testing.T) {
	// Key order and numbers survive: schemas are sent as given, compacted,
	// never re-encoded through a map.
	params := `{"type":"object","properties":{"z":{"type":"integer","maximum":9007199254740993},"a":{"type":"string"}},"required":["z","a"]}`
	req := &llm.Request{
		Model:    "m",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
		Tools:    []llm.ToolDef{{Name: "t", Parameters: json.RawMessage("{\n  " + params[1:])}},
		Output:   &llm.OutputSpec{Schema: json.RawMessage(params)},
	}
	body := sentBody(t, openai.Config{}, req, false)
	for _, want := range []string{
		`"parameters":` + params,
		`"json_schema":{"name":"output","strict":false,"schema":` + params + `}`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("request body %s\nlacks %s", body, want)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	user := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	tests := []struct {
		name string
		cfg  openai.Config
		req  *llm.Request
	}{
		{"nil request", openai.Config{}, nil},
		{"unknown role", openai.Config{}, &llm.Request{Messages: []llm.Message{{Role: "narrator", Content: "x"}}}},
		{"tool result without id", openai.Config{}, &llm.Request{Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}}},
		{"bad tool parameters", openai.Config{}, &llm.Request{Messages: user, Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage("{")}}}},
		{"bad output schema", openai.Config{}, &llm.Request{Messages: user, Output: &llm.OutputSpec{Schema: json.RawMessage("nope")}}},
		{"openai needs a model", openai.Config{Flavor: openai.FlavorOpenAI}, &llm.Request{Messages: user}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
			defer srv.Close()
			cfg := tt.cfg
			cfg.BaseURL = srv.URL + "/v1"
			m := newModel(t, cfg)
			_, err := m.Generate(t.Context(), tt.req)
			_, serr := collect(m.Stream(t.Context(), tt.req))
			for _, e := range []error{err, serr} {
				if ae, ok := errors.AsType[*llm.APIError](e); !ok || !errors.Is(e, llm.ErrBadRequest) || ae.StatusCode != 0 {
					t.Errorf("call = %v, want a local ErrBadRequest APIError", e)
				}
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}

func TestRequestModelDefault(t *testing.T) {
	tests := []struct {
		name      string
		cfgModel  string
		reqModel  string
		wantModel any // nil: left out
	}{
		{"config default", "served", "", "served"},
		{"request wins", "served", "other", "other"},
		{"server default", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &llm.Request{Model: tt.reqModel, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
			body := sentBody(t, openai.Config{Model: tt.cfgModel, Flavor: openai.FlavorLlamaCpp}, req, false)
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got["model"] != tt.wantModel {
				t.Errorf("model sent = %v, want %v (body %s)", got["model"], tt.wantModel, body)
			}
			if _, ok := got["max_tokens"]; ok {
				t.Errorf("max_tokens sent without Request.MaxTokens: %s", body)
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(readFile(t, "conformance", "tool_call.sse"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(readFile(t, "conformance", "tool_call.json"))
	}))
	defer srv.Close()
	m := newModel(t, openai.Config{BaseURL: srv.URL + "/v1", Flavor: openai.FlavorVLLM})
	req := backendtest.Request(backendtest.ToolCall)
	var wg sync.WaitGroup
	errs := make(chan error, 32) // one per call
	for i := range 32 {
		wg.Go(func() {
			var resp *llm.Response
			var err error
			if i%2 == 0 {
				resp, err = m.Generate(t.Context(), req)
			} else {
				var events []llm.Event
				events, err = collect(m.Stream(t.Context(), req))
				resp = accumulate(events)
			}
			if err == nil && len(resp.Message.ToolCalls) != 2 {
				err = fmt.Errorf("call %d: %d tool calls, want 2", i, len(resp.Message.ToolCalls))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
