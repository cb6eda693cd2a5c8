package oaiwire_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// pngBytes returns a w×h PNG.
func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(typ string, b []byte) string {
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// message decodes one message from JSON.
func message(t testing.TB, s string) *oaiwire.Message {
	t.Helper()
	var m oaiwire.Message
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return &m
}

// TestPartsText: a string and text-only parts stay text, with no parts.
func TestPartsText(t *testing.T) {
	for _, s := range []string{
		`{"role":"user","content":"hello"}`,
		`{"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]}`,
		`{"role":"system","content":[{"type":"text","text":"hello"}]}`,
	} {
		text, parts, err := message(t, s).Parts()
		if err != nil || text != "hello" || parts != nil {
			t.Errorf("%s: Parts = %q, %v, %v; want hello with no parts", s, text, parts, err)
		}
	}
}

// TestPartsMedia: every kind of media part decodes, in order, with its
// bytes, type, detail and (for a PNG) its size.
func TestPartsMedia(t *testing.T) {
	img := pngBytes(t, 40, 30)
	pdf := []byte("%PDF-1.4\n%%EOF\n")
	audio := []byte("RIFF\x00\x00\x00\x00WAVE")
	content, _ := json.Marshal([]any{
		map[string]any{"type": "text", "text": "Classify:"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", img), "detail": "low"}},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://cdn.example.com/a.jpg"}},
		map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(audio), "format": "wav"}},
		map[string]any{"type": "file", "file": map[string]any{"file_data": dataURL("application/pdf", pdf), "filename": "inv.pdf"}},
		map[string]any{"type": "file", "file": map[string]any{"file_id": "file-abc"}},
	})
	text, parts, err := message(t, `{"role":"user","content":`+string(content)+`}`).Parts()
	if err != nil || text != "" {
		t.Fatalf("Parts = %q, %v", text, err)
	}
	want := []llm.Part{
		{Kind: llm.PartText, Text: "Classify:"},
		{Kind: llm.PartImage, Data: img, MediaType: "image/png", Detail: "low", Width: 40, Height: 30},
		{Kind: llm.PartImage, URL: "https://cdn.example.com/a.jpg"},
		{Kind: llm.PartAudio, Data: audio, MediaType: "audio/wav"},
		{Kind: llm.PartFile, Data: pdf, MediaType: "application/pdf", Filename: "inv.pdf"},
		{Kind: llm.PartFile, FileID: "file-abc"},
	}
	got, _ := json.Marshal(parts)
	exp, _ := json.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Fatalf("parts\n%s\nwant\n%s", got, exp)
	}

	// Through the request: the user message carries the parts, the
	// system message its text.
	var r oaiwire.Request
	body := `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":` + string(content) + `}]}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	msgs, fault := r.LLMMessagesWithMedia()
	if fault != nil || len(msgs) != 2 || msgs[0].Content != "Be brief." || msgs[0].Parts != nil || len(msgs[1].Parts) != len(want) || msgs[1].Content != "" {
		t.Fatalf("LLMMessagesWithMedia = %+v, %+v", msgs, fault)
	}
}

// TestPartsRefused: each bad part is refused naming its index and field.
func TestDecodePartsRefused(t *testing.T) {
	img := pngBytes(t, 2, 2)
	for _, tt := range []struct {
		name, content string
		part          int
		field, msg    string
	}{
		{"unknown type", `[{"type":"text","text":"a"},{"type":"video_url","video_url":{}}]`, 1, "type", "unknown content part type"},
		{"no type", `[{"image_url":{"url":"https://x/a.png"}}]`, 0, "type", "needs a type"},
		{"http URL", `[{"type":"image_url","image_url":{"url":"http://cdn.example.com/a.png"}}]`, 0, "image_url.url", "neither an https URL nor a data: URL"},
		{"file URL", `[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]`, 0, "image_url.url", "neither an https URL"},
		{"no URL", `[{"type":"image_url","image_url":{}}]`, 0, "image_url.url", "no URL"},
		{"no image_url", `[{"type":"image_url"}]`, 0, "image_url", "needs image_url"},
		{"bad detail", `[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"ultra"}}]`, 0, "image_url.detail", `unknown detail "ultra"`},
		{"not base64", `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,!!notbase64"}}]`, 1, "image_url.url", "not base64"},
		{"data URL not base64-encoded", `[{"type":"image_url","image_url":{"url":"data:image/png,rawbytes"}}]`, 0, "image_url.url", "must be base64"},
		{"type that lies", `[{"type":"image_url","image_url":{"url":"` + dataURL("image/jpeg", img) + `"}}]`, 0, "image_url.url", "declared image/jpeg, but the data is image/png"},
		{"not an image", `[{"type":"image_url","image_url":{"url":"` + dataURL("image/png", []byte("<html>hi</html>")) + `"}}]`, 0, "image_url.url", "declared image/png, but the data is text/html"},
		{"unsupported image type", `[{"type":"image_url","image_url":{"url":"` + dataURL("image/svg+xml", []byte("<svg/>")) + `"}}]`, 0, "image_url.url", `"image/svg+xml" is not supported`},
		{"audio format", `[{"type":"input_audio","input_audio":{"data":"AAAA","format":"ogg"}}]`, 0, "input_audio.format", `unknown audio format "ogg"`},
		{"audio not base64", `[{"type":"input_audio","input_audio":{"data":"%%%","format":"mp3"}}]`, 0, "input_audio.data", "not base64"},
		{"file both", `[{"type":"file","file":{"file_id":"f","file_data":"` + dataURL("application/pdf", []byte("%PDF-1")) + `"}}]`, 0, "file", "not both"},
		{"file neither", `[{"type":"file","file":{"filename":"a.pdf"}}]`, 0, "file", "file_data"},
		{"file not a PDF", `[{"type":"file","file":{"file_data":"` + dataURL("application/pdf", []byte("MZ\x90")) + `"}}]`, 0, "file.file_data", "not a PDF"},
		{"file type", `[{"type":"file","file":{"file_data":"` + dataURL("text/plain", []byte("hi")) + `"}}]`, 0, "file.file_data", `"text/plain" is not supported`},
		{"text part without text", `[{"type":"text"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]`, 0, "text", "needs text"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, parts, err := message(t, `{"role":"user","content":`+tt.content+`}`).Parts()
			pe, ok := errors.AsType[*oaiwire.PartError](err)
			if !ok {
				t.Fatalf("Parts = %v, %v; want a *PartError", parts, err)
			}
			if pe.Part != tt.part || pe.Field != tt.field || !strings.Contains(pe.Err.Error(), tt.msg) {
				t.Fatalf("PartError{Part: %d, Field: %q, Err: %v}, want part %d, field %q, error with %q", pe.Part, pe.Field, pe.Err, tt.part, tt.field, tt.msg)
			}
		})
	}
}

// TestPartsMediaOnlyFromUsers: media in an assistant or system message is
// refused; content that is not an array is refused.
func TestPartsMediaOnlyFromUsers(t *testing.T) {
	for _, s := range []string{
		`{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}`,
		`{"role":"system","content":[{"type":"file","file":{"file_id":"f"}}]}`,
		`{"role":"user","content":{"type":"text"}}`,
		`{"role":"user","content":[{"type":"text","text":1}]}`,
	} {
		if _, parts, err := message(t, s).Parts(); err == nil {
			t.Errorf("%s: accepted as %+v", s, parts)
		}
	}
}

// FuzzMessageParts feeds arbitrary content to Parts: it never panics,
// returns text or parts but not both, every part is of a known kind and
// carries its media one way, and every refusal of an array names a part
// within it.
func FuzzMessageParts(f *testing.F) {
	img := dataURL("image/png", pngBytes(f, 3, 3))
	for _, s := range []string{
		`"hello"`,
		`null`,
		`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`,
		`[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"` + img + `","detail":"high"}}]`,
		`[{"type":"image_url","image_url":{"url":"https://cdn.example.com/p.webp"}}]`,
		`[{"type":"image_url","image_url":{"url":"data:image/png;base64,@@"}}]`,
		`[{"type":"image_url","image_url":{"url":"data:;base64,AAAA"}}]`,
		`[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]`,
		`[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQ=","filename":"a.pdf"}}]`,
		`[{"type":"file","file":{"file_id":"file-1"}}]`,
		`[{"type":"refusal","refusal":"no"}]`,
		`{"a":1}`,
	} {
		f.Add("user", []byte(s))
	}
	f.Add("assistant", []byte(`[{"type":"image_url","image_url":{"url":"https://x/y"}}]`))
	f.Fuzz(func(t *testing.T, role string, content []byte) {
		var m oaiwire.Message
		if json.Unmarshal([]byte(`{"content":`+string(content)+`}`), &m) != nil {
			return
		}
		m.Role = role
		text, parts, err := m.Parts()
		if err != nil {
			if pe, ok := errors.AsType[*oaiwire.PartError](err); ok {
				var n []json.RawMessage
				if json.Unmarshal(m.Content.Raw, &n) != nil || pe.Part < 0 || pe.Part >= len(n) {
					t.Fatalf("PartError names part %d of %s", pe.Part, content)
				}
			}
			return
		}
		if text != "" && parts != nil {
			t.Fatalf("both text %q and parts %+v", text, parts)
		}
		for _, p := range parts {
			switch p.Kind {
			case llm.PartText:
			case llm.PartImage:
				if (p.URL == "") == (p.Data == nil) || (p.Data != nil && p.MediaType == "") {
					t.Fatalf("image part %+v: not one of URL and Data", p)
				}
				if p.URL != "" && !strings.HasPrefix(strings.ToLower(p.URL), "https://") {
					t.Fatalf("image URL %q accepted", p.URL)
				}
			case llm.PartAudio:
				if p.MediaType == "" {
					t.Fatalf("audio part %+v without a type", p)
				}
			case llm.PartFile:
				if (p.FileID == "") == (p.Data == nil) {
					t.Fatalf("file part %+v: not one of FileID and Data", p)
				}
			default:
				t.Fatalf("part of kind %q", p.Kind)
			}
		}
	})
}
