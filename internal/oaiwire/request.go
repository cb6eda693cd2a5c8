package oaiwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

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
	out := make([]llm.Message, 0, len(r.Messages))
	for i := range r.Messages {
		m := &r.Messages[i]
		content, err := text(m)
		if err != nil {
			return nil, &MessageError{Fault: FaultContent, Message: i, Role: m.Role, Err: err}
		}
		msg := llm.Message{Content: content}
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
