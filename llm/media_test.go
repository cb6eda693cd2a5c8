package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/llm"
)

// TestMediaAccepts: each part is accepted only by a backend declaring its
// kind and form, and a refusal names both.
func TestMediaAccepts(t *testing.T) {
	png := llm.Part{Kind: llm.PartImage, Data: []byte{0x89, 'P', 'N', 'G'}, MediaType: "image/png"}
	byURL := llm.Part{Kind: llm.PartImage, URL: "https://cdn.example.com/a.png"}
	dataURL := llm.Part{Kind: llm.PartImage, URL: "data:image/png;base64,iVBORw0KGgo="}
	wav := llm.Part{Kind: llm.PartAudio, Data: []byte("RIFF"), MediaType: "audio/wav"}
	pdf := llm.Part{Kind: llm.PartFile, Data: []byte("%PDF-1.7"), MediaType: "application/pdf"}
	fileID := llm.Part{Kind: llm.PartFile, FileID: "file-abc"}
	pdfURL := llm.Part{Kind: llm.PartFile, URL: "https://cdn.example.com/a.pdf"}
	all := llm.Media{Image: true, ImageURL: true, Audio: true, File: true, FileURL: true, FileID: true}
	for _, p := range []llm.Part{png, byURL, dataURL, wav, pdf, pdfURL, fileID, {Kind: llm.PartText, Text: "hi"}} {
		if err := all.Accepts(p); err != nil {
			t.Errorf("all media: %+v refused: %v", p, err)
		}
	}
	for _, c := range []struct {
		m    llm.Media
		p    llm.Part
		want string // "" accepted
	}{
		{llm.Media{}, png, "no image parts as bytes"},
		{llm.Media{Image: true}, byURL, "no image parts by URL"},
		{llm.Media{Image: true}, dataURL, ""},
		{llm.Media{ImageURL: true}, dataURL, "no image parts as bytes"},
		{llm.Media{Image: true}, wav, "no audio parts as bytes"},
		{llm.Media{File: true}, fileID, "no file parts by provider file id"},
		{llm.Media{FileURL: true}, pdf, "no file parts as bytes"},
		// OpenAI's chat API takes file ids but no document URLs; Anthropic both.
		{llm.Media{File: true, FileID: true}, pdfURL, "no file parts by URL"},
		{llm.Media{FileURL: true}, fileID, "no file parts by provider file id"},
		{llm.Media{File: true, FileID: true}, fileID, ""},
		{llm.Media{FileURL: true}, pdfURL, ""},
		{llm.Media{}, llm.Part{Kind: "video"}, `unknown content part kind "video"`},
	} {
		err := c.m.Accepts(c.p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v accepts %+v: %v, want nil", c.m, c.p, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v accepts %+v: %v, want an error containing %q", c.m, c.p, err, c.want)
		}
	}
}

// TestPartsRoundTrip: a message with parts reads back equal from JSON, and
// a text-only message has no "parts" member.
func TestPartsRoundTrip(t *testing.T) {
	m := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		{Kind: llm.PartText, Text: "Classify this photo."},
		{Kind: llm.PartImage, Data: []byte{0, 1, 2, 255}, MediaType: "image/png", Detail: "low", Width: 64, Height: 48, Ref: "photos/a.png", Hash: "ab12"},
		{Kind: llm.PartFile, FileID: "file-1", Filename: "invoice.pdf", Pages: 3},
	}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got llm.Message
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	text, _ := json.Marshal(llm.Message{Role: llm.RoleUser, Content: "hi"})
	if strings.Contains(string(text), "parts") {
		t.Errorf("text-only message %s has a parts member", text)
	}
	req := llm.Request{Messages: []llm.Message{m, {Role: llm.RoleUser, Content: "abc"}}}
	if got, want := req.TextBytes(), len("Classify this photo.")+3; got != want {
		t.Errorf("TextBytes = %d, want %d (text parts and content)", got, want)
	}
}
