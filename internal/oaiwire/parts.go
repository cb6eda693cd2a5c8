package oaiwire

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/jsonenc"
	"github.com/batchagent/batchagent/llm"
)

// toolMediaNote is a tool message's content when its result is only
// media: the media follows in a user message (see [AppendRequest]).
const toolMediaNote = "(The result is the media in the next message.)"

// appendParts appends msg's content as an array of chat content parts:
// msg.Content first as a text part when it is set beside parts, then each
// part. Only a user message takes media (text, image_url, input_audio,
// file); system and assistant messages take text parts only.
func appendParts(b []byte, msg *llm.Message) ([]byte, error) {
	b = append(b, '[')
	n := 0
	if msg.Content != "" {
		b = appendTextPart(b, msg.Content)
		n++
	}
	for i := range msg.Parts {
		p := &msg.Parts[i]
		if p.Kind != llm.PartText && msg.Role != llm.RoleUser {
			return b, fmt.Errorf("part %d: a %s message takes only text parts, not %s", i, msg.Role, p.Kind)
		}
		if n > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendPart(b, p); err != nil {
			return b, fmt.Errorf("part %d: %v", i, err)
		}
		n++
	}
	return append(b, ']'), nil
}

// appendTextPart appends a text content part.
func appendTextPart(b []byte, text string) []byte {
	b = append(b, `{"type":"text","text":`...)
	return append(jsonenc.AppendString(b, text, false), '}')
}

// appendPart appends p as a chat content part: text, image_url (an https
// or data: URL, or Data written as a base64 data: URL, with detail),
// input_audio (base64 data with format wav or mp3) or file (file_data, a
// data: URL of the document, with a filename; or file_id). It refuses a
// part that gives its media no way the chat API takes.
func appendPart(b []byte, p *llm.Part) ([]byte, error) {
	switch p.Kind {
	case llm.PartText:
		return appendTextPart(b, p.Text), nil
	case llm.PartImage:
		switch p.Detail {
		case "", "auto", "low", "high", "original":
		default:
			return b, fmt.Errorf("image detail %q is none of auto, low, high, original", p.Detail)
		}
		b = append(b, `{"type":"image_url","image_url":{"url":`...)
		switch {
		case p.URL != "":
			b = jsonenc.AppendString(b, p.URL, false)
		case len(p.Data) > 0:
			if !strings.HasPrefix(p.MediaType, "image/") {
				return b, fmt.Errorf("image data has media type %q, not image/*", p.MediaType)
			}
			b = appendDataURL(b, p.MediaType, p.Data)
		default:
			return b, fmt.Errorf("image part has neither URL nor data")
		}
		if p.Detail != "" {
			b = jsonenc.AppendString(append(b, `,"detail":`...), p.Detail, false)
		}
		return append(b, "}}"...), nil
	case llm.PartAudio:
		mediaType, payload := p.MediaType, ""
		switch {
		case p.URL != "":
			var ok bool
			if mediaType, payload, ok = splitDataURL(p.URL); !ok {
				return b, fmt.Errorf("audio part by URL: the chat API takes audio only as data (Data, or a base64 data: URL)")
			}
		case len(p.Data) == 0:
			return b, fmt.Errorf("audio part has no data")
		}
		format, err := audioFormat(mediaType)
		if err != nil {
			return b, err
		}
		b = append(b, `{"type":"input_audio","input_audio":{"data":`...)
		if payload != "" {
			b = jsonenc.AppendString(b, payload, false)
		} else {
			b = base64.StdEncoding.AppendEncode(append(b, '"'), p.Data)
			b = append(b, '"')
		}
		b = append(b, `,"format":"`...)
		b = append(b, format...)
		return append(b, `"}}`...), nil
	case llm.PartFile:
		b = append(b, `{"type":"file","file":{`...)
		switch {
		case p.FileID != "":
			b = jsonenc.AppendString(append(b, `"file_id":`...), p.FileID, false)
		case p.URL != "" && !isDataURL(p.URL):
			return b, fmt.Errorf("file part by URL %q: the chat API takes documents as data or a file id, not by URL", p.URL)
		case p.URL != "":
			b = jsonenc.AppendString(append(b, `"file_data":`...), p.URL, false)
			b = jsonenc.AppendString(append(b, `,"filename":`...), filename(p), false)
		case len(p.Data) > 0:
			mt := p.MediaType
			if mt == "" {
				mt = "application/pdf"
			}
			b = appendDataURL(append(b, `"file_data":`...), mt, p.Data)
			b = jsonenc.AppendString(append(b, `,"filename":`...), filename(p), false)
		default:
			return b, fmt.Errorf("file part has no file id, URL or data")
		}
		return append(b, "}}"...), nil
	default:
		return b, fmt.Errorf("unknown content part kind %q", p.Kind)
	}
}

// appendDataURL appends, as a JSON string, the base64 data: URL of data
// of type mediaType.
func appendDataURL(b []byte, mediaType string, data []byte) []byte {
	// A media type holding a quote, backslash or control character would
	// need escaping; write it through the string encoder then.
	if strings.ContainsFunc(mediaType, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' || r >= 0x7f }) {
		return jsonenc.AppendString(b, "data:"+mediaType+";base64,"+base64.StdEncoding.EncodeToString(data), false)
	}
	b = append(b, `"data:`...)
	b = append(b, mediaType...)
	b = append(b, ";base64,"...)
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, '"')
}

// audioFormat returns input_audio's format for an audio media type.
func audioFormat(mediaType string) (string, error) {
	switch strings.ToLower(mediaType) {
	case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave":
		return "wav", nil
	case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg-3":
		return "mp3", nil
	}
	return "", fmt.Errorf("audio media type %q: the chat API takes wav (audio/wav) or mp3 (audio/mpeg)", mediaType)
}

// filename is the name sent with a document's data: p.Filename, else
// "document.pdf" (the chat API wants a name with file_data).
func filename(p *llm.Part) string {
	if p.Filename != "" {
		return p.Filename
	}
	return "document.pdf"
}

// hasMedia reports whether msg holds a part other than text.
func hasMedia(msg *llm.Message) bool {
	for i := range msg.Parts {
		if msg.Parts[i].Kind != llm.PartText {
			return true
		}
	}
	return false
}

// appendToolContent appends a tool message's content when it has parts:
// its text (Content, then the text parts) as an array of text parts, or
// toolMediaNote when it holds only media. The chat API takes only text
// in a tool message; its media is sent after the tool messages by
// appendToolMedia.
func appendToolContent(b []byte, msg *llm.Message) []byte {
	n := 0
	if msg.Content != "" {
		b = appendTextPart(append(b, '['), msg.Content)
		n++
	}
	for i := range msg.Parts {
		if p := &msg.Parts[i]; p.Kind == llm.PartText {
			if n == 0 {
				b = append(b, '[')
			} else {
				b = append(b, ',')
			}
			b = appendTextPart(b, p.Text)
			n++
		}
	}
	if n == 0 {
		return jsonenc.AppendString(b, toolMediaNote, false)
	}
	return append(b, ']')
}

// appendToolMedia appends, after a run of tool messages, one user message
// holding their media: for each tool message with media, a text part
// naming its call, then its media parts.
func appendToolMedia(b []byte, run []llm.Message, first int) ([]byte, error) {
	b = append(b, `,{"role":"user","content":[`...)
	n := 0
	for i := range run {
		msg := &run[i]
		if !hasMedia(msg) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		label := "Media returned by tool call " + msg.ToolCallID
		if msg.Name != "" {
			label += " (" + msg.Name + ")"
		}
		b = appendTextPart(b, label+":")
		n++
		for j := range msg.Parts {
			p := &msg.Parts[j]
			if p.Kind == llm.PartText {
				continue
			}
			var err error
			if b, err = appendPart(append(b, ','), p); err != nil {
				return b, fmt.Errorf("message %d: part %d: %v", first+i, j, err)
			}
		}
	}
	return append(b, "]}"...), nil
}

// splitDataURL returns the media type and base64 payload of a base64
// data: URL ("data:audio/wav;base64,UklG…"); ok is false for any other
// URL. The payload is not decoded: the provider reads it.
func splitDataURL(u string) (mediaType, payload string, ok bool) {
	if !isDataURL(u) {
		return "", "", false
	}
	head, payload, ok := strings.Cut(u[5:], ",")
	if !ok {
		return "", "", false
	}
	mediaType, ok = strings.CutSuffix(head, ";base64")
	if !ok || payload == "" {
		return "", "", false
	}
	if i := strings.IndexByte(mediaType, ';'); i >= 0 { // parameters
		mediaType = mediaType[:i]
	}
	return mediaType, payload, true
}

// isDataURL reports whether u is a data: URL.
func isDataURL(u string) bool { return len(u) >= 5 && strings.EqualFold(u[:5], "data:") }
