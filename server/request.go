package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/llm"
)

// chatRequest is the body of POST /v1/chat/completions as far as the
// gateway reads it. Fields it does not know are ignored, as vLLM and
// llama.cpp do, so that clients sending newer parameters keep working.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      *responseFormat `json:"response_format"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// includeUsage reports whether a streamed answer ends with a usage chunk.
func (cr *chatRequest) includeUsage() bool {
	return cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage
}

// content returns the text of a message's content: a string, an array
// of content parts (their text parts joined), or null.
func (m *chatMessage) content() (string, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
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

// llmRequest turns the request into the model request of a passthrough.
// It returns an *apiError (400) naming the field at fault.
func (cr *chatRequest) llmRequest() (*llm.Request, *apiError) {
	if len(cr.Messages) == 0 {
		return nil, badParam("messages", "messages must be a non-empty array")
	}
	if cr.N != nil && *cr.N != 1 {
		return nil, badParam("n", "only n=1 is supported")
	}
	req := &llm.Request{Temperature: cr.Temperature, TopP: cr.TopP, Seed: cr.Seed}
	for i, m := range cr.Messages {
		text, err := m.content()
		if err != nil {
			return nil, badParam(fmt.Sprintf("messages[%d].content", i), err.Error())
		}
		msg := llm.Message{Content: text}
		switch m.Role {
		case "system", "developer":
			msg.Role = llm.RoleSystem
		case "user":
			msg.Role = llm.RoleUser
		case "assistant":
			msg.Role = llm.RoleAssistant
			for j, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return nil, badParam(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), "a tool call needs a function name")
				}
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, badParam(fmt.Sprintf("messages[%d].tool_call_id", i), "a tool message needs tool_call_id")
			}
			msg.Role, msg.ToolCallID, msg.Name = llm.RoleTool, m.ToolCallID, m.Name
		default:
			return nil, badParam(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("unknown role %q (want system, developer, user, assistant or tool)", m.Role))
		}
		req.Messages = append(req.Messages, msg)
	}
	// tool_choice "none" withholds the tools; "auto", "required" and a
	// named function pass them on as they are (llm.Request has no choice).
	none := bytes.Equal(bytes.TrimSpace(cr.ToolChoice), []byte(`"none"`))
	for i, t := range cr.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, badParam(fmt.Sprintf("tools[%d]", i), "a tool must be of type function and have a name")
		}
		if !none {
			req.Tools = append(req.Tools, llm.ToolDef{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		}
	}
	if rf := cr.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			req.Output = &llm.OutputSpec{Name: "json_object", Schema: json.RawMessage(`{"type":"object"}`)}
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, badParam("response_format.json_schema", "json_schema needs a schema")
			}
			req.Output = &llm.OutputSpec{Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema}
		default:
			return nil, badParam("response_format.type", fmt.Sprintf("unknown response format %q (want text, json_object or json_schema)", rf.Type))
		}
	}
	switch {
	case cr.MaxCompletionTokens != nil:
		req.MaxTokens = *cr.MaxCompletionTokens
	case cr.MaxTokens != nil:
		req.MaxTokens = *cr.MaxTokens
	}
	if req.MaxTokens < 0 {
		return nil, badParam("max_tokens", "max_tokens must be positive")
	}
	if stop := bytes.TrimSpace(cr.Stop); len(stop) > 0 && !bytes.Equal(stop, []byte("null")) {
		var one string
		if json.Unmarshal(stop, &one) == nil {
			req.Stop = []string{one}
		} else if err := json.Unmarshal(stop, &req.Stop); err != nil {
			return nil, badParam("stop", "stop must be a string or an array of strings")
		}
	}
	return req, nil
}
