package llm

import (
	"encoding/json"
	"slices"
	"strconv"
)

// Role says who wrote a [Message].
type Role string

// The roles of a conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// A Message is one entry of a conversation. Messages are values: once handed
// to a [Model] they must not be modified, and a Model must not modify them.
type Message struct {
	Role Role `json:"role"`
	// Content is the text of the message. For a tool message it is the tool's
	// result (or its error, with IsError set).
	Content string `json:"content,omitempty"`
	// Parts, when set, is the message's content as parts in order: text
	// and media (images, audio, documents); Content is then empty. Only
	// messages carrying media have parts, so text-only conversations
	// keep their shape and cost.
	Parts []Part `json:"parts,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the [ToolCall] it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool message.
	Name string `json:"name,omitempty"`
	// IsError marks a tool message whose content describes a failure.
	IsError bool `json:"is_error,omitempty"`
}

// A ToolCall is one call to a tool requested by the model.
//
// In JSON, Arguments that are valid JSON are embedded under "arguments"
// (compacted, as encoding/json does); malformed ones (a model's cut-off or
// broken call) cannot be embedded, so they are written as a string under
// "arguments_text" and read back byte for byte (invalid UTF-8 aside). A
// checkpoint of a conversation holding such a call therefore still saves.
// Empty arguments are written as neither and read back empty.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON object of arguments exactly as the model wrote it;
	// it may be malformed.
	Arguments json.RawMessage `json:"arguments"`
}

// toolCallJSON is the JSON form of a ToolCall.
type toolCallJSON struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ArgumentsText *string         `json:"arguments_text,omitempty"`
}

// MarshalJSON writes malformed arguments as text; see [ToolCall].
func (c ToolCall) MarshalJSON() ([]byte, error) {
	// Empty arguments are left out, so that they come back empty; a model's
	// literal null is written, and comes back, as null.
	v := toolCallJSON{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
		text := string(c.Arguments)
		v.Arguments, v.ArgumentsText = nil, &text
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var v toolCallJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*c = ToolCall{ID: v.ID, Name: v.Name, Arguments: v.Arguments}
	if v.ArgumentsText != nil {
		c.Arguments = json.RawMessage(*v.ArgumentsText)
	}
	return nil
}

// A ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the tool's arguments object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// OutputSpec asks for a final answer that is a JSON value matching Schema.
// Backends with native structured output use it to constrain decoding;
// the rest ignore it (the prompt then carries the instructions).
type OutputSpec struct {
	// Name names the schema for backends that need one. Defaults to "output".
	Name string `json:"name,omitempty"`
	// Schema is the JSON Schema the final answer must satisfy.
	Schema json.RawMessage `json:"schema"`
}

// ToolName returns the name under which a backend that takes structured
// output through a tool offers that tool beside tools: Name, or "output"
// when Name is empty, unless one of tools has that name; then the first of
// NAME_2, NAME_3... that none has, NAME shortened so that the result stays
// within maxLen bytes. It depends on its arguments alone, so every turn of
// an agent gets the same name.
func (o *OutputSpec) ToolName(tools []ToolDef, maxLen int) string {
	name := o.Name
	if name == "" {
		name = "output"
	}
	taken := func(n string) bool {
		return slices.ContainsFunc(tools, func(t ToolDef) bool { return t.Name == n })
	}
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		suffix := "_" + strconv.Itoa(i)
		if n := name[:min(len(name), max(maxLen-len(suffix), 0))] + suffix; !taken(n) {
			return n
		}
	}
}

// A Request is everything a [Model] needs for one generation.
type Request struct {
	// Model is the backend's model name; empty means the backend's default.
	Model string `json:"model,omitempty"`
	// Messages is the conversation so far. A system message, when present, is
	// first; the shared prefix (system prompt, tool definitions and output
	// instructions) is byte-identical across the agents of one job.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call.
	Tools []ToolDef `json:"tools,omitempty"`
	// Output, when set, asks for structured output.
	Output *OutputSpec `json:"output,omitempty"`
	// MaxTokens caps the generated tokens; zero means the backend's default.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature, when set, overrides the backend's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP, when set, overrides the backend's nucleus sampling default: the
	// model samples from the smallest set of tokens whose probabilities
	// add up to TopP.
	TopP *float64 `json:"top_p,omitempty"`
	// Seed, when set, asks the backend to sample deterministically, as far
	// as it can. OpenAI-compatible servers take it; the Anthropic and
	// Bedrock APIs have no such parameter, and those backends ignore it.
	Seed *int64 `json:"seed,omitempty"`
	// Stop lists sequences that end the generation when the model writes
	// one; the sequence is not part of the answer. Empty means none beyond
	// the backend's own. Backends limit their number (OpenAI: 4).
	Stop []string `json:"stop,omitempty"`
	// Input is the input the agent's task was rendered from (its fields by
	// name), for a model that plays a real one: backend/sim takes tool
	// arguments from it, as a model copies a path from its task. Real
	// backends do not send it, and it is not part of the request's JSON.
	// Nil means none (a packed call, a gateway request). The caller must
	// not modify it.
	Input map[string]any `json:"-"`
	// Extra holds request fields that no other member holds, by name,
	// each a JSON value as the client sent it (a gateway's logprobs,
	// top_k, a vendor's guided_json). A backend sends each on verbatim or
	// translated, as its [Capabilities].Extra declares, and refuses the
	// others: an extra field is never dropped. Nil means none.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// FinishReason says why a generation stopped.
type FinishReason string

// The finish reasons.
const (
	FinishStop      FinishReason = "stop"
	FinishToolCalls FinishReason = "tool_calls"
	FinishLength    FinishReason = "length"
)

// A Response is the outcome of one generation.
type Response struct {
	// Message is the assistant message generated.
	Message Message `json:"message"`
	// FinishReason says why generation stopped.
	FinishReason FinishReason `json:"finish_reason,omitempty"`
	// Usage counts the tokens of the call.
	Usage Usage `json:"usage"`
	// RateLimit is what the backend reported about its rate limits, or nil.
	RateLimit *RateLimitInfo `json:"-"`
	// Extra is what the backend answered beyond the other members
	// (logprobs, system_fingerprint), or nil.
	Extra *Extra `json:"extra,omitempty"`
}

// Usage counts the tokens of one or more model calls.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// CachedTokens is the part of PromptTokens served from the backend's
	// prefix cache, when the backend reports it.
	CachedTokens int64 `json:"cached_tokens,omitempty"`
	// CacheWriteTokens is the part of PromptTokens written to the
	// backend's prefix cache, billed above the input price where the
	// backend reports it (Anthropic's cache_creation_input_tokens, Bedrock's
	// CacheWriteInputTokens).
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// MediaTokens is the part of PromptTokens that is media (images,
	// audio, documents): as the backend reports it where it does (the
	// simulator; OpenAI's audio_tokens), else as the agent estimates it
	// from the request's media parts under the backend's billing
	// ([Media.Billing]). Zero for a text-only conversation.
	MediaTokens int64 `json:"media_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		CachedTokens:     u.CachedTokens + v.CachedTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		MediaTokens:      u.MediaTokens + v.MediaTokens,
	}
}

// Total is the number of prompt and completion tokens.
func (u Usage) Total() int64 { return u.PromptTokens + u.CompletionTokens }

// TextBytes is the size in bytes of the request's text: every message's
// content, text parts and tool calls (name and arguments) and the tool definitions
// (name, description, parameters). Token estimates that need no tokenizer
// divide it (the simulator's usage, admission's token pacing without a
// counter).
func (r *Request) TextBytes() int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content)
		for _, p := range m.Parts {
			n += len(p.Text)
		}
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range r.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}
