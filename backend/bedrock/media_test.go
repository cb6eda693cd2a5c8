package bedrock_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

// mediaRequest is a user turn of text and part p.
func mediaRequest(p llm.Part) *llm.Request {
	return &llm.Request{Model: "m", Messages: []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "Look."}, p}},
	}}
}

// TestMediaRefused checks that a part Converse cannot take fails the call
// before any request is sent, with llm.ErrBadRequest and a message naming
// the message, the part and the reason.
func TestMediaRefused(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	m := newModel(t, srv.URL)
	png := backendtest.ImagePNG
	tests := []struct {
		name string
		req  *llm.Request
		want string
	}{
		{"audio", mediaRequest(llm.Part{Kind: llm.PartAudio, Data: backendtest.AudioWAV, MediaType: "audio/wav"}), "message 0: content part 1: the backend takes no audio parts as bytes"},
		{"image by URL", mediaRequest(llm.Part{Kind: llm.PartImage, URL: backendtest.ImageURL}), "message 0: content part 1: the backend takes no image parts by URL"},
		{"document by file id", mediaRequest(llm.Part{Kind: llm.PartFile, FileID: "file-1"}), "the backend takes no file parts by provider file id"},
		{"data URL not base64", mediaRequest(llm.Part{Kind: llm.PartImage, URL: "data:image/png;base64,%%%not base64"}), "message 0: content part 1: image: data URL is not valid base64"},
		{"data URL without type", mediaRequest(llm.Part{Kind: llm.PartImage, URL: "data:;base64,AAAA"}), "image: data URL names no media type"},
		{"image type", mediaRequest(llm.Part{Kind: llm.PartImage, Data: png, MediaType: "image/bmp"}), `image: media type "image/bmp" is not one Converse takes`},
		{"image without type", mediaRequest(llm.Part{Kind: llm.PartImage, Data: png}), "image: bytes without a media type"},
		{"document type", mediaRequest(llm.Part{Kind: llm.PartFile, Data: []byte("PK"), MediaType: "application/zip"}), `document: media type "application/zip" is not one Converse takes`},
		{"empty document", mediaRequest(llm.Part{Kind: llm.PartFile}), "document: no data"},
		{"audio in a tool result", &llm.Request{Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Go."},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c", Parts: []llm.Part{{Kind: llm.PartAudio, Data: backendtest.AudioWAV, MediaType: "audio/wav"}}},
		}}, "message 2: tool result: content part 0: the backend takes no audio parts"},
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
