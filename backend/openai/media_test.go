package openai_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

// Small media for the golden requests: the first bytes of a PNG, a WAV
// and a PDF (base64 holding '+' and '/').
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xfb\xff\xfe")
	wavBytes = []byte("RIFF$\x00\x00\x00WAVEfmt \xff\xfb")
	pdfBytes = []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
)

// TestMediaRequestGolden pins the exact bodies sent, to the OpenAI API,
// for a user message with images (bytes as a data: URL, and an https URL
// with detail), with a PDF, with audio, and for a read_file result that
// is an image; and parses the fixture answer back. -update rewrites the
// golden files.
func TestMediaRequestGolden(t *testing.T) {
	readImage := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"photos/mug.png"}`)}}}
	tests := []struct {
		golden string
		msgs   []llm.Message
	}{
		{"image.golden", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			{Kind: llm.PartText, Text: "Classify the product in these photos."},
			{Kind: llm.PartImage, Data: pngBytes, MediaType: "image/png", Width: 512, Height: 512, Ref: "photos/mug.png"},
			{Kind: llm.PartImage, URL: "https://cdn.example.com/mug-2.jpg", Detail: "low"},
		}}}},
		{"pdf.golden", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			{Kind: llm.PartText, Text: "Extract the invoice total."},
			{Kind: llm.PartFile, Data: pdfBytes, MediaType: "application/pdf", Filename: "invoice-7.pdf", Pages: 2},
			{Kind: llm.PartFile, FileID: "file-6F2ksmvXxt4VdoqmHRw6kL"},
		}}}},
		{"audio.golden", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			{Kind: llm.PartText, Text: "Transcribe and tag the call."},
			{Kind: llm.PartAudio, Data: wavBytes, MediaType: "audio/wav"},
		}}}},
		{"tool_image.golden", []llm.Message{
			{Role: llm.RoleUser, Content: "Describe photos/mug.png."},
			readImage,
			{Role: llm.RoleTool, ToolCallID: "call_1", Name: "read_file", Parts: []llm.Part{{Kind: llm.PartImage, Data: pngBytes, MediaType: "image/png"}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(readFile(t, "media", "answer.json"))
			}))
			defer srv.Close()
			m := newModel(t, openai.Config{Flavor: openai.FlavorOpenAI, BaseURL: srv.URL + "/v1", Model: "gpt-4o-mini"})
			for _, msg := range tt.msgs {
				for _, p := range msg.Parts {
					if err := m.Capabilities().Media.Accepts(p); err != nil {
						t.Fatalf("the openai flavor refuses %+v: %v", p, err)
					}
				}
			}
			resp, err := m.Generate(t.Context(), &llm.Request{Messages: tt.msgs, MaxTokens: 100})
			if err != nil {
				t.Fatalf("Generate = %v", err)
			}
			if want := `{"label":"mug","colour":"red"}`; resp.Message.Content != want {
				t.Errorf("answer %q, want %q", resp.Message.Content, want)
			}
			if want := (llm.Usage{PromptTokens: 2867, CompletionTokens: 12}); resp.Usage != want {
				t.Errorf("usage %+v, want %+v", resp.Usage, want)
			}

			var got bytes.Buffer
			if err := json.Indent(&got, body, "", "  "); err != nil {
				t.Fatalf("request body %s: %v", body, err)
			}
			got.WriteByte('\n')
			path := filepath.Join("testdata", "media", tt.golden)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want := readFile(t, "media", tt.golden); !bytes.Equal(got.Bytes(), want) {
				t.Errorf("request body:\n%s\nwant (%s):\n%s", got.Bytes(), path, want)
			}
		})
	}
}
