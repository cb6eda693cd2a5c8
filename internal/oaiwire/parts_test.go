package oaiwire_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// partsRequest is a conversation with every kind of content part, each
// way it is given, and a tool result holding media.
func partsRequest() *llm.Request {
	img := llm.Part{Kind: llm.PartImage, Data: []byte("\x89PNG\xfb\xff"), MediaType: "image/png"}
	return &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Parts: []llm.Part{{Kind: llm.PartText, Text: "sys"}}},
		{Role: llm.RoleUser, Content: "look", Parts: []llm.Part{
			img,
			{Kind: llm.PartImage, URL: "https://cdn.example.com/a.jpg", Detail: "low"},
			{Kind: llm.PartAudio, Data: []byte("RIFF"), MediaType: "audio/wav"},
			{Kind: llm.PartAudio, URL: "data:audio/mpeg;base64,SUQz"},
			{Kind: llm.PartFile, Data: []byte("%PDF"), Filename: "a.pdf"},
			{Kind: llm.PartFile, FileID: "file-1"},
		}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartText, Text: "reading"}}, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file"}, {ID: "c2", Name: "read_file"}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_file", Parts: []llm.Part{img}},
		{Role: llm.RoleTool, ToolCallID: "c2", Content: "text only"},
		{Role: llm.RoleAssistant, Content: "done"},
	}}
}

// TestPartsMatchSDK: a request with content parts goes through the SDK's
// ChatCompletionNewParams unchanged, and a tool result's media follows
// the tool messages in a user message.
func TestPartsMatchSDK(t *testing.T) {
	for _, o := range []oaiwire.RequestOptions{{}, {Model: "served", MaxCompletionTokens: true, Stream: true}} {
		body, err := oaiwire.AppendRequest(nil, partsRequest(), o)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, body, o.Stream)
		for _, want := range []string{
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR/v/"}}`,
			`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}`,
			`{"type":"input_audio","input_audio":{"data":"SUQz","format":"mp3"}}`,
			`{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERg==","filename":"a.pdf"}}`,
			`{"role":"tool","content":"(The result is the media in the next message.)","tool_call_id":"c1"},` +
				`{"role":"tool","content":"text only","tool_call_id":"c2"},` +
				`{"role":"user","content":[{"type":"text","text":"Media returned by tool call c1 (read_file):"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR/v/"}}]},` +
				`{"role":"assistant","content":"done"}`,
		} {
			if !bytes.Contains(body, []byte(want)) {
				t.Errorf("body %s\nlacks %s", body, want)
			}
		}
	}
}

// TestPartsRefused: a part the chat API cannot take is refused with an
// error naming the message, the part and why.
func TestPartsRefused(t *testing.T) {
	user := func(p llm.Part) []llm.Message {
		return []llm.Message{{Role: llm.RoleUser}, {Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText}, p}}}
	}
	tests := []struct {
		msgs []llm.Message
		want string
	}{
		{user(llm.Part{Kind: llm.PartImage}), "message 1: part 1: image part has neither URL nor data"},
		{user(llm.Part{Kind: llm.PartImage, Data: []byte("x"), MediaType: "text/html"}), `message 1: part 1: image data has media type "text/html", not image/*`},
		{user(llm.Part{Kind: llm.PartImage, URL: "https://x", Detail: "max"}), `image detail "max" is none of auto, low, high, original`},
		{user(llm.Part{Kind: llm.PartAudio, URL: "https://x/a.wav"}), "takes audio only as data"},
		{user(llm.Part{Kind: llm.PartAudio, URL: "data:audio/wav,%00"}), "takes audio only as data"},
		{user(llm.Part{Kind: llm.PartAudio, Data: []byte("x"), MediaType: "audio/flac"}), `audio media type "audio/flac": the chat API takes wav (audio/wav) or mp3 (audio/mpeg)`},
		{user(llm.Part{Kind: llm.PartFile, URL: "https://x/a.pdf"}), "not by URL"},
		{user(llm.Part{Kind: llm.PartFile}), "file part has no file id, URL or data"},
		{user(llm.Part{Kind: "video"}), `unknown content part kind "video"`},
		{[]llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{{Kind: llm.PartImage, URL: "https://x"}}}}, "message 0: part 0: a system message takes only text parts, not image"},
		{[]llm.Message{{Role: llm.RoleTool, ToolCallID: "c", Parts: []llm.Part{{Kind: llm.PartText}, {Kind: llm.PartAudio}}}}, "message 0: part 1: audio part has no data"},
	}
	for _, tt := range tests {
		_, err := oaiwire.AppendRequest(nil, &llm.Request{Messages: tt.msgs}, oaiwire.RequestOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("AppendRequest(%+v) = %v, want an error with %q", tt.msgs, err, tt.want)
		}
	}
}

// TestTextPathUnchanged: a text-only request allocates nothing beyond its
// buffer: the parts writer costs the text path nothing.
func TestTextPathUnchanged(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	req := requests()[2] // a tool round trip; SchemaName allocates for an output schema
	buf := make([]byte, 0, 64<<10)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := oaiwire.AppendRequest(buf, req, oaiwire.RequestOptions{Model: "m", Stream: true}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a text-only request: %v allocations, want 0", n)
	}
}
