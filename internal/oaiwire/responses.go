package oaiwire

import "encoding/json"

// ResponsesRequest is the body of POST /v1/responses (OpenAI's Responses
// API) as far as the gateway maps it onto a chat completion. Fields it
// does not map are kept in Unknown, to be refused by name.
type ResponsesRequest struct {
	Model             string          `json:"model"`
	Input             json.RawMessage `json:"input"` // a string, or an array of input items
	Instructions      *string         `json:"instructions,omitempty"`
	Tools             []ResponsesTool `json:"tools,omitempty"`
	ToolChoice        json.RawMessage `json:"tool_choice,omitempty"`
	MaxOutputTokens   *int            `json:"max_output_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	Text              *ResponsesText  `json:"text,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	Store             *bool           `json:"store,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	User              string          `json:"user,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
}

// ResponsesFields are the request fields [ResponsesRequest] maps.
var ResponsesFields = []string{"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
	"temperature", "top_p", "text", "stream", "store", "metadata", "user", "parallel_tool_calls"}

// ResponsesTool is a tool of a Responses request: a function, flat (its
// name and parameters beside its type, not under "function").
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponsesText is a Responses request's text options: its output format.
type ResponsesText struct {
	Format *ResponsesFormat `json:"format,omitempty"`
}

// ResponsesFormat is text.format: "text", "json_object", or
// "json_schema" with the schema beside its type.
type ResponsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponsesItem is an item of a Responses request's input: a message
// (role and content, type "message" or none), a function call the model
// made before ("function_call") or its output ("function_call_output").
type ResponsesItem struct {
	Type      string          `json:"type,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // a string, or an array of content parts
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
}

// ResponsesPart is a content part of an input message: "input_text" and
// "output_text" (text), "input_image" (image_url, a URL or a data: URL).
type ResponsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// ResponsesUsage is the usage of a Responses answer.
type ResponsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}
