package anthropic_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

// mediaRequest is a user turn of text and part p.
func mediaRequest(p llm.Part) *llm.Request {
	return &llm.Request{Model: "m", MaxTokens: 8, Messages: []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "Look."}, p}},
	}}
}

// TestMediaRefused checks that a part the Messages API cannot take fails
// the call before any request is sent, with llm.ErrBadRequest and a
// message naming the message, the part and the reason.
func TestMediaRefused(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	m := newModel(t, anthropic.Config{BaseURL: srv.URL, APIKey: backendtest.APIKey})
	png := backendtest.ImagePNG
	tests := []struct {
		name string
		req  *llm.Request
		want string
	}{
		{"audio", mediaRequest(llm.Part{Kind: llm.PartAudio, Data: backendtest.AudioWAV, MediaType: "audio/wav"}), "message 0: content part 1: the backend takes no audio parts as bytes"},
		{"data URL not base64", mediaRequest(llm.Part{Kind: llm.PartImage, URL: "data:image/png;base64,%%%not base64"}), "message 0: content part 1: image: data URL is not valid base64"},
		{"data URL without data", mediaRequest(llm.Part{Kind: llm.PartImage, URL: "data:image/png;base64"}), "data URL has no comma"},
		{"image type", mediaRequest(llm.Part{Kind: llm.PartImage, Data: png, MediaType: "image/bmp"}), `image: media type "image/bmp" is not one the API takes`},
		{"image without type", mediaRequest(llm.Part{Kind: llm.PartImage, Data: png}), "image: bytes without a media type"},
		{"image by http URL", mediaRequest(llm.Part{Kind: llm.PartImage, URL: "http://127.0.0.1/x.png"}), `image: URL "http://127.0.0.1/x.png" is not an https URL`},
		{"document type", mediaRequest(llm.Part{Kind: llm.PartFile, Data: []byte("PK"), MediaType: "application/zip"}), `document: media type "application/zip" is not one the API takes (application/pdf)`},
		{"empty image", mediaRequest(llm.Part{Kind: llm.PartImage}), "image: no data, URL or file id"},
		{"unknown kind", mediaRequest(llm.Part{Kind: "video", Data: png}), `unknown content part kind "video"`},
		{"audio in a tool result", &llm.Request{Model: "m", MaxTokens: 8, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Go."},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c", Parts: []llm.Part{{Kind: llm.PartAudio, Data: backendtest.AudioWAV, MediaType: "audio/wav"}}},
		}}, "message 2 (tool result): content part 0: the backend takes no audio parts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Generate(t.Context(), tt.req)
			if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Generate() = %v, want llm.ErrBadRequest saying %q", err, tt.want)
			}
			for _, e := range m.Stream(t.Context(), tt.req) {
				if !errors.Is(e, llm.ErrBadRequest) {
					t.Errorf("Stream() error = %v, want llm.ErrBadRequest", e)
				}
				break
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// TestMediaFileID checks that a document given by file id is sent as a
// file source with the Files API beta named, and that other requests name
// no beta.
func TestMediaFileID(t *testing.T) {
	type sent struct {
		beta string
		body string
	}
	got := make(chan sent, 2) // one per call below
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- sent{r.Header.Get("Anthropic-Beta"), string(b)}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(readFile(t, "conformance", "plain.json"))
	}))
	t.Cleanup(srv.Close)
	m := newModel(t, anthropic.Config{BaseURL: srv.URL, APIKey: backendtest.APIKey})

	req := mediaRequest(llm.Part{Kind: llm.PartFile, FileID: "file_011CNha8iCJcU1wXNR6q4V8w", Filename: "report.pdf"})
	if _, err := m.Generate(t.Context(), req); err != nil {
		t.Fatalf("Generate(file id) = %v", err)
	}
	s := <-got
	if s.beta != "files-api-2025-04-14" {
		t.Errorf("anthropic-beta = %q, want files-api-2025-04-14", s.beta)
	}
	want := `{"source":{"file_id":"file_011CNha8iCJcU1wXNR6q4V8w","type":"file"},"title":"report.pdf","type":"document"}`
	if !strings.Contains(s.body, want) {
		t.Errorf("body %s\nwant it to hold %s", s.body, want)
	}

	if _, err := m.Generate(t.Context(), backendtest.Request(backendtest.Plain)); err != nil {
		t.Fatalf("Generate(plain) = %v", err)
	}
	if s := <-got; s.beta != "" {
		t.Errorf("plain request: anthropic-beta = %q, want none", s.beta)
	}
}
