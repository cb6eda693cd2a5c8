package openai

import (
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// png is the start of a PNG file: bytes whose base64 holds '+' and '/'.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xfb\xff\xfe")

// mediaRequests are requests with content parts: every kind each way it
// is given, in user, system, assistant and tool messages; and refused,
// those with parts both encoders refuse.
func mediaRequests() (ok, refused []*llm.Request) {
	user := func(parts ...llm.Part) *llm.Request {
		return &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: parts}}}
	}
	text := llm.Part{Kind: llm.PartText, Text: "Describe <this> \u2028 \xff"}
	toolCall := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file"}, {ID: "c2", Name: "read_file"}}}
	img := llm.Part{Kind: llm.PartImage, Data: png, MediaType: "image/png"}
	ok = []*llm.Request{
		user(text, img),
		user(llm.Part{Kind: llm.PartImage, URL: "https://cdn.example.com/a.jpg?x=1&y=\"2\"", Detail: "low"}),
		user(llm.Part{Kind: llm.PartImage, URL: "data:image/jpeg;base64,/9j/4AAQ", Detail: "high"}),
		user(llm.Part{Kind: llm.PartImage, Data: png, MediaType: "image/we\"ird\x01", Detail: "auto"}),
		user(llm.Part{Kind: llm.PartAudio, Data: []byte("RIFF\x00\xff"), MediaType: "audio/wav"}),
		user(llm.Part{Kind: llm.PartAudio, Data: []byte("ID3"), MediaType: "Audio/MPEG"}),
		user(llm.Part{Kind: llm.PartAudio, URL: "data:audio/mpeg;codecs=mp3;base64,SUQz"}),
		user(llm.Part{Kind: llm.PartFile, Data: []byte("%PDF-1.7\n"), MediaType: "application/pdf", Filename: "invoice 7.pdf"}),
		user(llm.Part{Kind: llm.PartFile, Data: []byte("%PDF-1.4")}),
		user(llm.Part{Kind: llm.PartFile, URL: "data:application/pdf;base64,JVBERi0="}),
		user(llm.Part{Kind: llm.PartFile, FileID: "file-abc123"}),
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "first", Parts: []llm.Part{img}}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{text, text}}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{text}, ToolCalls: toolCall.ToolCalls}}},
		// A tool result's media follows the run of tool messages as a user message.
		{Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Read a.png and b.pdf."},
			toolCall,
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_file", Parts: []llm.Part{img}},
			{Role: llm.RoleTool, ToolCallID: "c2", Parts: []llm.Part{{Kind: llm.PartText, Text: "b.pdf, 2 pages"}, {Kind: llm.PartFile, Data: []byte("%PDF"), Filename: "b.pdf"}}},
			{Role: llm.RoleAssistant, Content: "done"},
		}},
		{Model: "m", Messages: []llm.Message{toolCall,
			{Role: llm.RoleTool, ToolCallID: "c1", Content: "only text", Parts: []llm.Part{text}},
			{Role: llm.RoleTool, ToolCallID: "c2", Content: "plain"},
		}},
		{Model: "m", Messages: []llm.Message{toolCall, {Role: llm.RoleTool, ToolCallID: "c1", Parts: []llm.Part{img}}}},
	}
	refused = []*llm.Request{
		user(llm.Part{Kind: llm.PartImage}),
		user(llm.Part{Kind: llm.PartImage, Data: png, MediaType: "application/pdf"}),
		user(llm.Part{Kind: llm.PartImage, URL: "https://x/a.png", Detail: "ultra"}),
		user(llm.Part{Kind: llm.PartAudio, URL: "https://x/a.wav"}),
		user(llm.Part{Kind: llm.PartAudio, URL: "data:audio/wav,notbase64"}),
		user(llm.Part{Kind: llm.PartAudio}),
		user(llm.Part{Kind: llm.PartAudio, Data: []byte("x"), MediaType: "audio/ogg"}),
		user(llm.Part{Kind: llm.PartFile, URL: "https://x/a.pdf"}),
		user(llm.Part{Kind: llm.PartFile}),
		user(llm.Part{Kind: "video", URL: "https://x/a.mp4"}),
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{img}}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{text, img}}}},
		{Model: "m", Messages: []llm.Message{toolCall, {Role: llm.RoleTool, ToolCallID: "c1", Parts: []llm.Part{{Kind: llm.PartImage}}}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, Parts: []llm.Part{img}}}},
	}
	return ok, refused
}

// TestMediaBodyMatchesSDK: a request with content parts is written as
// the SDK's content part types encode it, or refused with the same
// error.
func TestMediaBodyMatchesSDK(t *testing.T) {
	for _, flavor := range []Flavor{FlavorVLLM, FlavorOpenAI} {
		m := testModel(t, flavor, "")
		ok, refused := mediaRequests()
		for i, r := range append(ok, refused...) {
			t.Run("", func(t *testing.T) {
				if _, err := m.body(r, false); (err != nil) != (i >= len(ok)) {
					t.Fatalf("body error %v, want one: %v", err, i >= len(ok))
				}
				defer func() {
					if t.Failed() {
						t.Logf("flavor %s, request %d", flavor, i)
					}
				}()
				checkBody(t, m, r)
			})
		}
	}
}

// FuzzMediaBodyMatchesSDK holds body equal to the SDK's encoding on
// content parts built from arbitrary fields, in a user message and as a
// tool result.
func FuzzMediaBodyMatchesSDK(f *testing.F) {
	f.Add("image", "", png, "image/png", "low", "", "", "hi", false)
	f.Add("image", "https://a/b.png", []byte(nil), "", "", "", "", "", true)
	f.Add("audio", "data:audio/wav;base64,UklG", []byte(nil), "", "", "", "", "x", false)
	f.Add("audio", "", []byte("RIFF"), "audio/x-wav", "", "", "", "", true)
	f.Add("file", "", []byte("%PDF"), "", "", "", "a\"b.pdf", "", false)
	f.Add("file", "", []byte(nil), "", "", "file-1", "", "", true)
	f.Add("file", "DATA:application/pdf;base64,JVB", []byte(nil), "", "", "", "", "", false)
	m := testModel(f, FlavorOpenAI, "m")
	f.Fuzz(func(t *testing.T, kind, url string, data []byte, mediaType, detail, fileID, filename, text string, tool bool) {
		p := llm.Part{Kind: llm.PartKind(kind), URL: url, Data: data, MediaType: mediaType, Detail: detail, FileID: fileID, Filename: filename}
		parts := []llm.Part{p}
		if text != "" {
			parts = append([]llm.Part{{Kind: llm.PartText, Text: text}}, parts...)
		}
		req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: parts}}}
		if tool {
			req.Messages = append(req.Messages,
				llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file"}}},
				llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: text, Parts: parts})
		}
		checkBody(t, m, req)
	})
}
