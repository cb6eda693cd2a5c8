package openai_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

func TestConformance(t *testing.T) {
	for _, flavor := range []openai.Flavor{openai.FlavorGeneric, openai.FlavorOpenAI, openai.FlavorVLLM} {
		t.Run(string(flavor), func(t *testing.T) {
			name := string(flavor)
			if flavor == openai.FlavorGeneric {
				name = "openai"
			}
			backendtest.Run(t, backendtest.Backend{
				Name: name,
				New: func(t *testing.T, baseURL string) llm.Model {
					return newModel(t, openai.Config{BaseURL: baseURL + "/v1", APIKey: backendtest.APIKey, Flavor: flavor})
				},
				Handler: func(t *testing.T, s backendtest.Scenario, stream bool) http.Handler {
					return fixture(t, flavor, s, stream)
				},
			})
		})
	}
}

// errorStatus is the HTTP status of each error scenario; the bodies are
// testdata/conformance/SCENARIO.error.json.
var errorStatus = map[backendtest.Scenario]int{
	backendtest.RateLimited:   http.StatusTooManyRequests,
	backendtest.Overloaded:    http.StatusServiceUnavailable,
	backendtest.ServerError:   http.StatusInternalServerError,
	backendtest.BadRequest:    http.StatusBadRequest,
	backendtest.ContextLength: http.StatusBadRequest,
	backendtest.Auth:          http.StatusUnauthorized,
}

// fixture serves scenario s in OpenAI's wire format from
// testdata/conformance: SCENARIO.json answers a plain call, SCENARIO.sse a
// streamed one (written event by event, flushed), SCENARIO.error.json an
// error; auth.error.json quotes the configured key, as some servers do. It
// checks the request it receives with t.Errorf.
func fixture(t *testing.T, flavor openai.Flavor, s backendtest.Scenario, stream bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := s
		if backendtest.IsMedia(s) {
			// The media travels as content parts (their bytes are held
			// equal to the SDK's in TestMediaBodyMatchesSDK); the answer
			// is Plain's.
			checkMedia(t, s, r)
			s = backendtest.Plain
		} else {
			checkRequest(t, flavor, s, stream, r)
		}
		if s == backendtest.KeyEcho {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": backendtest.KeyEchoMessage, "type": "invalid_request_error"}})
			return
		}
		if status, ok := errorStatus[s]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("x-request-id", "req_fixture")
			if s == backendtest.RateLimited {
				w.Header().Set("retry-after", "2")
				w.Header().Set("x-ratelimit-limit-requests", "3")
				w.Header().Set("x-ratelimit-remaining-requests", "0")
			}
			body := readFile(t, "conformance", string(s)+".error.json")
			if s == backendtest.Auth && !bytes.Contains(body, []byte(backendtest.APIKey)) {
				t.Errorf("fixture auth.error.json does not quote backendtest.APIKey, so the suite cannot see it leak")
			}
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(readFile(t, "conformance", string(s)+".json"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		fl := w.(http.Flusher)
		for ev := range bytes.SplitAfterSeq(readFile(t, "conformance", string(s)+".sse"), []byte("\n\n")) {
			_, _ = w.Write(ev)
			fl.Flush()
		}
		switch s {
		case backendtest.StreamCut:
			panic(http.ErrAbortHandler) // close the connection mid-stream
		case backendtest.Cancel:
			<-r.Context().Done()
		}
	})
}

// wireRequest is the part of a chat-completions request body the fixture
// checks.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []wireMessage   `json:"messages"`
	Tools               []wireTool      `json:"tools"`
	ResponseFormat      *wireFormat     `json:"response_format"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *wireStreamOpts `json:"stream_options"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"` // a JSON string holding JSON
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type wireFormat struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Strict *bool           `json:"strict"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

type wireStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

func ptr[T any](v T) *T { return &v }

// wantRequest is the request body the suite's scenario s must produce.
func wantRequest(flavor openai.Flavor, s backendtest.Scenario, stream bool) wireRequest {
	want := wireRequest{
		Model: backendtest.ModelName,
		Messages: []wireMessage{
			{Role: "system", Content: ptr(backendtest.SystemText)},
			{Role: "user", Content: ptr(backendtest.UserText)},
		},
	}
	if flavor == openai.FlavorOpenAI {
		want.MaxCompletionTokens = ptr(backendtest.MaxTokens)
	} else {
		want.MaxTokens = ptr(backendtest.MaxTokens)
	}
	if stream {
		want.Stream = true
		want.StreamOptions = &wireStreamOpts{IncludeUsage: true}
	}
	switch s {
	case backendtest.ToolCall, backendtest.ToolResult:
		for _, d := range backendtest.ToolDefs {
			var tool wireTool
			tool.Type = "function"
			tool.Function.Name, tool.Function.Description, tool.Function.Parameters = d.Name, d.Description, d.Parameters
			want.Tools = append(want.Tools, tool)
		}
	case backendtest.Structured:
		want.ResponseFormat = &wireFormat{Type: "json_schema"}
		want.ResponseFormat.JSONSchema.Name = backendtest.OutputSpec.Name
		want.ResponseFormat.JSONSchema.Strict = ptr(false)
		want.ResponseFormat.JSONSchema.Schema = backendtest.OutputSpec.Schema
	}
	if s == backendtest.ToolResult {
		var call wireToolCall
		call.ID, call.Type = "call_1", "function"
		call.Function.Name = "read_file"
		call.Function.Arguments, _ = json.Marshal(string(backendtest.ToolCalls[0].Arguments))
		want.Messages = append(want.Messages[:1],
			wireMessage{Role: "user", Content: ptr("Read a.go.")},
			wireMessage{Role: "assistant", ToolCalls: []wireToolCall{call}},
			wireMessage{Role: "tool", ToolCallID: "call_1", Content: ptr(backendtest.ToolResultText)},
		)
	}
	return want
}

// checkRequest reports, with t.Errorf, how r differs from what scenario s
// must send.
func checkRequest(t *testing.T, flavor openai.Flavor, s backendtest.Scenario, stream bool, r *http.Request) {
	t.Helper()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	if got, want := r.Header.Get("Authorization"), "Bearer "+backendtest.APIKey; got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("reading the request body: %v", err)
		return
	}
	var got wireRequest
	if err := json.Unmarshal(body, &got); err != nil {
		t.Errorf("request body %s: %v", body, err)
		return
	}
	// Tool-call arguments travel as a JSON string holding JSON: compare
	// the JSON inside.
	for i := range got.Messages {
		for j := range got.Messages[i].ToolCalls {
			a := &got.Messages[i].ToolCalls[j].Function.Arguments
			var s string
			if json.Unmarshal(*a, &s) == nil {
				*a, _ = json.Marshal(s)
			}
		}
	}
	if diff := cmp.Diff(wantRequest(flavor, s, stream), got, jsonTransformer); diff != "" {
		t.Errorf("%s request body (-want +got):\n%s\nbody: %s", s, diff, body)
	}
}

// mediaPart is what the request body of each media scenario must hold:
// its media in OpenAI's content-part form.
var mediaPart = map[backendtest.Scenario]string{
	backendtest.MediaImage:        `{"type":"image_url","image_url":{"url":"data:image/png;base64,`,
	backendtest.MediaImageDataURL: `{"type":"image_url","image_url":{"url":"data:image/png;base64,`,
	backendtest.MediaImageURL:     `{"type":"image_url","image_url":{"url":"` + backendtest.ImageURL + `"}}`,
	backendtest.MediaFile:         `{"type":"file","file":{"file_data":"data:application/pdf;base64,`,
	backendtest.MediaAudio:        `{"type":"input_audio","input_audio":{"data":"`,
	backendtest.MediaToolImage:    `{"type":"text","text":"Media returned by tool call call_1 (read_file):"},{"type":"image_url"`,
}

// checkMedia reports, with t.Errorf, a media scenario's request whose body
// lacks its media part or its text.
func checkMedia(t *testing.T, s backendtest.Scenario, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("%s: read request body: %v", s, err)
		return
	}
	if !bytes.Contains(body, []byte(mediaPart[s])) {
		t.Errorf("%s: request body lacks %s:\n%s", s, mediaPart[s], body)
	}
	if s != backendtest.MediaToolImage && !bytes.Contains(body, []byte(`{"type":"text","text":"`+backendtest.MediaText+`"}`)) {
		t.Errorf("%s: request body lacks the text part %q:\n%s", s, backendtest.MediaText, body)
	}
}
