package oaiwire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif"  // image.DecodeConfig reads a GIF's size
	_ "image/jpeg" // and a JPEG's
	_ "image/png"  // and a PNG's
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// Request is the body of POST /v1/chat/completions as far as our servers
// read it. Fields it does not know are ignored, as vLLM and llama.cpp do,
// so that clients sending newer parameters keep working.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	// Extra is the members Request does not read, by name, as the client
	// wrote them; set by [Request.ReadExtra], nil when none.
	Extra map[string]json.RawMessage `json:"-"`
}

// StreamOptions is a request's "stream_options".
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Content is a message's content: a string, an array of content parts,
// or null. A string is decoded as it is read, in one pass (the long
// contents of a conversation are strings), the rest kept as raw JSON.
type Content struct {
	// Text is the content when it is a string (IsText).
	Text   string
	IsText bool
	// Raw is the content when it is not a string: an array of parts, or
	// another value; nil when null or absent.
	Raw json.RawMessage
}

// TextContent returns the content that is the string s.
func TextContent(s string) Content { return Content{Text: s, IsText: true} }

// UnmarshalJSON reads the content.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	switch {
	case len(b) > 0 && b[0] == '"':
		c.IsText = true
		// Without escapes, and as UTF-8, the string is its bytes (b is
		// valid JSON: the decoder checked it).
		if inner := b[1 : len(b)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			c.Text = string(inner)
			return nil
		}
		return json.Unmarshal(b, &c.Text)
	case string(b) == "null":
		return nil
	}
	c.Raw = bytes.Clone(b)
	return nil
}

// MarshalJSON writes the content.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.IsText:
		return json.Marshal(c.Text)
	case c.Raw == nil:
		return []byte("null"), nil
	}
	return c.Raw, nil
}

// ToolCall is a tool call of an assistant message, or of a stream
// chunk's delta (with Index).
type ToolCall struct {
	Index    *int     `json:"index,omitempty"`
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function Function `json:"function"`
}

// Function is the function a tool call calls, its arguments a JSON text
// in a string.
type Function struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool is one of a request's tools.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef declares a function tool. (The simulator renders a
// request's tools into its prompt with these tags, so they decide its
// token counts.)
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat is a request's "response_format".
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is the "json_schema" of a response format.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// IncludeUsage reports whether a streamed answer ends with a usage chunk.
func (r *Request) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// Text returns the text of a message's content: a string, an array of
// content parts (their text parts joined; a part of another type is an
// error), or null.
func (m *Message) Text() (string, error) {
	if m.Content.IsText {
		return m.Content.Text, nil
	}
	raw := m.Content.Raw
	if len(raw) == 0 {
		return "", nil
	}
	switch raw[0] {
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type != "text" {
				return "", fmt.Errorf("content part of type %q is not supported (only text)", p.Type)
			}
			b.WriteString(p.Text)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("content must be a string, an array of content parts or null")
}

// MessageFault says what is wrong with a message [Request.LLMMessages]
// refuses.
type MessageFault int

// The faults of a message.
const (
	FaultContent     MessageFault = iota + 1 // its content could not be read (Err says why)
	FaultToolName                            // a tool call (Call) has no function name
	FaultToolCallID                          // a tool message has no tool_call_id
	FaultUnknownRole                         // its role is none of system, developer, user, assistant, tool
)

// MessageError is a message that [Request.LLMMessages] refuses. Each
// server words it its own way.
type MessageError struct {
	Fault   MessageFault
	Message int    // the message's index
	Call    int    // the tool call's index, for FaultToolName
	Role    string // the message's role
	Err     error  // the content's error, for FaultContent
}

// LLMMessages converts the request's messages: system and developer
// messages to llm.RoleSystem, then user, assistant (with their tool
// calls) and tool messages. text reads a message's content (for example
// [Message.Text]).
func (r *Request) LLMMessages(text func(*Message) (string, error)) ([]llm.Message, *MessageError) {
	return r.llmMessages(func(m *Message) (string, []llm.Part, error) {
		s, err := text(m)
		return s, nil, err
	})
}

// LLMMessagesWithMedia converts the request's messages as [Request.LLMMessages]
// does, reading each message's content with [Message.Parts]: a user
// message carrying images, audio or files gets them as llm.Message.Parts;
// any other message keeps its text in Content. A content part that
// cannot be read is a FaultContent whose Err is a *[PartError].
func (r *Request) LLMMessagesWithMedia() ([]llm.Message, *MessageError) {
	return r.llmMessages((*Message).Parts)
}

func (r *Request) llmMessages(read func(*Message) (string, []llm.Part, error)) ([]llm.Message, *MessageError) {
	out := make([]llm.Message, 0, len(r.Messages))
	for i := range r.Messages {
		m := &r.Messages[i]
		content, parts, err := read(m)
		if err != nil {
			return nil, &MessageError{Fault: FaultContent, Message: i, Role: m.Role, Err: err}
		}
		msg := llm.Message{Content: content, Parts: parts}
		switch m.Role {
		case "system", "developer":
			msg.Role = llm.RoleSystem
		case "user":
			msg.Role = llm.RoleUser
		case "assistant":
			msg.Role = llm.RoleAssistant
			for j, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return nil, &MessageError{Fault: FaultToolName, Message: i, Call: j, Role: m.Role}
				}
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, &MessageError{Fault: FaultToolCallID, Message: i, Role: m.Role}
			}
			msg.Role, msg.ToolCallID, msg.Name = llm.RoleTool, m.ToolCallID, m.Name
		default:
			return nil, &MessageError{Fault: FaultUnknownRole, Message: i, Role: m.Role}
		}
		out = append(out, msg)
	}
	return out, nil
}

// LLMTools converts the request's tools. A tool that is not a function
// with a name is refused: bad is its index, or -1 when all are good.
func (r *Request) LLMTools() (tools []llm.ToolDef, bad int) {
	for i, t := range r.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, i
		}
		tools = append(tools, llm.ToolDef{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return tools, -1
}

// PartError is a content part that [Message.Parts] refuses: the part's
// index in the content array, the field at fault (relative to the part,
// as "image_url.url"; "" for the part as a whole) and why.
type PartError struct {
	Part  int
	Field string
	Err   error
}

func (e *PartError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("content part %d: %v", e.Part, e.Err)
	}
	return fmt.Sprintf("content part %d: %s: %v", e.Part, e.Field, e.Err)
}

func (e *PartError) Unwrap() error { return e.Err }

// wirePart is one element of a content array as chat completions sends it.
type wirePart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// Parts reads a message's content: a string, or an array of content
// parts, or null. Content that is text alone (a string, or text parts,
// joined) is returned as text with no parts, as [Message.Text] returns
// it: the text path is unchanged. Content that carries media is returned
// as parts in order: text, image_url {url, detail} (an https URL, or a
// data: URL of a PNG, JPEG, GIF or WebP image in base64 whose bytes are
// of the type it declares), input_audio {data, format} (base64 wav or
// mp3) and file {file_data, file_id, filename} (a PDF as a base64 data:
// URL, or a provider's file id). Media is taken in user messages only. A
// part that cannot be read is a *[PartError] naming its index and field.
func (m *Message) Parts() (string, []llm.Part, error) {
	if m.Content.IsText {
		return m.Content.Text, nil, nil
	}
	raw := m.Content.Raw
	if len(raw) == 0 {
		return "", nil, nil
	}
	if raw[0] != '[' {
		return "", nil, fmt.Errorf("content must be a string, an array of content parts or null")
	}
	var wire []wirePart
	if err := json.Unmarshal(raw, &wire); err != nil {
		return "", nil, fmt.Errorf("content parts: %w", err)
	}
	media := false
	for _, w := range wire {
		if w.Type != "text" {
			media = true
			break
		}
	}
	if !media {
		var b strings.Builder
		for j, w := range wire {
			if w.Text == nil {
				return "", nil, &PartError{Part: j, Field: "text", Err: errors.New("a text part needs text")}
			}
			b.WriteString(*w.Text)
		}
		return b.String(), nil, nil
	}
	if m.Role != "user" {
		return "", nil, fmt.Errorf("a %s message's content may hold text parts only (images, audio and files go in user messages)", m.Role)
	}
	parts := make([]llm.Part, 0, len(wire))
	for j := range wire {
		p, field, err := readPart(&wire[j])
		if err != nil {
			return "", nil, &PartError{Part: j, Field: field, Err: err}
		}
		parts = append(parts, p)
	}
	return "", parts, nil
}

// readPart reads one content part, or returns the field at fault and why.
func readPart(w *wirePart) (llm.Part, string, error) {
	switch w.Type {
	case "text":
		if w.Text == nil {
			return llm.Part{}, "text", errors.New("a text part needs text")
		}
		return llm.Part{Kind: llm.PartText, Text: *w.Text}, "", nil
	case "image_url":
		if w.ImageURL == nil {
			return llm.Part{}, "image_url", errors.New("an image_url part needs image_url {url, detail}")
		}
		switch w.ImageURL.Detail {
		case "", "auto", "low", "high", "original":
		default:
			return llm.Part{}, "image_url.detail", fmt.Errorf("unknown detail %q (want auto, low, high or original)", w.ImageURL.Detail)
		}
		p := llm.Part{Kind: llm.PartImage, Detail: w.ImageURL.Detail}
		u := w.ImageURL.URL
		if !prefixFold(u, "data:") {
			if err := httpsURL(u); err != nil {
				return llm.Part{}, "image_url.url", err
			}
			p.URL = u
			return p, "", nil
		}
		typ, data, err := readDataURL(u)
		if err != nil {
			return llm.Part{}, "image_url.url", err
		}
		if err := checkImage(typ, data, &p); err != nil {
			return llm.Part{}, "image_url.url", err
		}
		p.Data, p.MediaType = data, typ
		return p, "", nil
	case "input_audio":
		a := w.InputAudio
		if a == nil {
			return llm.Part{}, "input_audio", errors.New("an input_audio part needs input_audio {data, format}")
		}
		typ, ok := audioTypes[a.Format]
		if !ok {
			return llm.Part{}, "input_audio.format", fmt.Errorf("unknown audio format %q (want wav or mp3)", a.Format)
		}
		if a.Data == "" {
			return llm.Part{}, "input_audio.data", errors.New("no audio data")
		}
		data, err := base64.StdEncoding.DecodeString(a.Data)
		if err != nil {
			return llm.Part{}, "input_audio.data", fmt.Errorf("not base64: %v", err)
		}
		return llm.Part{Kind: llm.PartAudio, Data: data, MediaType: typ}, "", nil
	case "file":
		f := w.File
		if f == nil {
			return llm.Part{}, "file", errors.New("a file part needs file {file_data or file_id, filename}")
		}
		p := llm.Part{Kind: llm.PartFile, Filename: f.Filename}
		switch {
		case f.FileData != "" && f.FileID != "":
			return llm.Part{}, "file", errors.New("give file_data or file_id, not both")
		case f.FileID != "":
			p.FileID = f.FileID
			return p, "", nil
		case f.FileData == "":
			return llm.Part{}, "file", errors.New("a file part needs file_data (a base64 data: URL) or file_id")
		}
		typ, data, err := readDataURL(f.FileData)
		if err != nil {
			return llm.Part{}, "file.file_data", err
		}
		if typ != "application/pdf" {
			return llm.Part{}, "file.file_data", fmt.Errorf("media type %q is not supported (want application/pdf)", typ)
		}
		if !bytes.HasPrefix(data, []byte("%PDF-")) {
			return llm.Part{}, "file.file_data", errors.New("declared application/pdf, but the data is not a PDF")
		}
		p.Data, p.MediaType = data, typ
		return p, "", nil
	case "":
		return llm.Part{}, "type", errors.New("a content part needs a type")
	}
	return llm.Part{}, "type", fmt.Errorf("unknown content part type %q (want text, image_url, input_audio or file)", w.Type)
}

// audioTypes maps input_audio's formats to media types.
var audioTypes = map[string]string{"wav": "audio/wav", "mp3": "audio/mpeg"}

// imageTypes are the image media types a data: URL may hold.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// checkImage checks that data is an image of type typ, and sets p's
// Width and Height when its header tells them (PNG, JPEG, GIF).
func checkImage(typ string, data []byte, p *llm.Part) error {
	if !imageTypes[typ] {
		return fmt.Errorf("media type %q is not supported (want image/png, image/jpeg, image/gif or image/webp)", typ)
	}
	if got := http.DetectContentType(data); got != typ {
		return fmt.Errorf("declared %s, but the data is %s", typ, got)
	}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		p.Width, p.Height = cfg.Width, cfg.Height
	}
	return nil
}

// httpsURL checks that u is an absolute https URL with a host.
func httpsURL(u string) error {
	pu, err := url.Parse(u)
	switch {
	case u == "":
		return errors.New("no URL")
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case !strings.EqualFold(pu.Scheme, "https") || pu.Host == "":
		return fmt.Errorf("%q is neither an https URL nor a data: URL", clipText(u, 64))
	}
	return nil
}

// readDataURL reads a data: URL whose data is base64
// ("data:image/png;base64,…"): its media type, lowercased without
// parameters, and its bytes. It is media.DecodeDataURL, the one strict
// data: URL reader, with the gateway's own wording of what is wrong; the
// bytes are checked against the type by the caller.
func readDataURL(u string) (mediaType string, data []byte, err error) {
	mediaType, data, err = media.DecodeDataURL(u, 0)
	switch {
	case err == nil:
		return mediaType, data, nil
	case errors.Is(err, media.ErrNotDataURL):
		return "", nil, errors.New("not a data: URL")
	case errors.Is(err, media.ErrDataURLSyntax):
		return "", nil, errors.New("a data: URL needs a comma before its data")
	case errors.Is(err, media.ErrDataURLEncoded):
		return "", nil, errors.New("a data: URL's data must be base64 (data:TYPE;base64,…)")
	case errors.Is(err, media.ErrDataURLNoType):
		return "", nil, errors.New("a data: URL needs a media type")
	case errors.Is(err, media.ErrDataURLNoData):
		return "", nil, errors.New("a data: URL with no data")
	case errors.Is(err, media.ErrDataURLBase64):
		return "", nil, fmt.Errorf("a data: URL's data is not base64: %v", errors.Unwrap(err))
	}
	return "", nil, err
}

func prefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// clipText returns s cut to at most n bytes, at a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
