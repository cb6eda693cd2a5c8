package oaiwire

import (
	"encoding/json"
	"strconv"

	"github.com/batchagent/batchagent/jsonenc"
	"github.com/batchagent/batchagent/llm"
)

// Completion is a non-streamed answer (object "chat.completion").
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage"`
}

// Choice is one choice of a [Completion].
type Choice struct {
	Index        int       `json:"index"`
	Message      Reply     `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// Reply is the assistant's message of a [Choice].
type Reply struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// Refusal is the model's refusal, a JSON string, or [Null] as OpenAI
	// sends when there is none; absent when empty (the simulator's
	// answers).
	Refusal   json.RawMessage `json:"refusal,omitempty"`
	ToolCalls []ToolCall      `json:"tool_calls,omitempty"`
	// ReasoningContent is the reasoning text, as vLLM and DeepSeek send
	// it; the gateway's agent mode sends its steps there.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// Events is the gateway's agent-mode steps (a JSON array of its
	// events), absent elsewhere.
	Events json.RawMessage `json:"batchagent_events,omitempty"`
}

// Null is JSON's null, for the members that are null rather than absent.
var Null = json.RawMessage("null")

// NewReply returns the assistant's message for content and calls: the
// content is null when it is empty and there are calls.
func NewReply(content string, calls []llm.ToolCall) Reply {
	r := Reply{Role: "assistant"}
	if content != "" || len(calls) == 0 {
		r.Content = &content
	}
	for _, c := range calls {
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: c.ID, Type: "function", Function: Function{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	return r
}

// Usage is OpenAI's usage object, as a server writes it.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
		// MediaTokens is the part of PromptTokens that is media, as the
		// simulator and the gateway report it: batchagent's own field,
		// absent when zero (OpenAI reports audio_tokens alone).
		MediaTokens int64 `json:"media_tokens,omitempty"`
	} `json:"prompt_tokens_details"`
	// Cost is the usage's cost at the model's configured price (as
	// OpenRouter reports it); absent without a price.
	Cost *float64 `json:"cost,omitempty"`
}

// NewUsage returns the usage object of u, cached tokens included.
func NewUsage(u llm.Usage) *Usage {
	w := &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total()}
	w.PromptTokensDetails.CachedTokens = u.CachedTokens
	w.PromptTokensDetails.MediaTokens = u.MediaTokens
	return w
}

// ClientUsage is the part of a usage object that a client reads, with
// what a server left out as nil.
type ClientUsage struct {
	PromptTokens        int64         `json:"prompt_tokens"`
	CompletionTokens    int64         `json:"completion_tokens"`
	PromptTokensDetails *TokenDetails `json:"prompt_tokens_details"`
}

// TokenDetails is the part of a usage's "prompt_tokens_details" that a
// client reads; CachedTokens is nil when a server did not send it.
type TokenDetails struct {
	CachedTokens *int64 `json:"cached_tokens"`
	// AudioTokens is OpenAI's count of the prompt's audio tokens, and
	// MediaTokens batchagent's of its media tokens (the simulator's, the
	// gateway's); zero when absent.
	AudioTokens int64 `json:"audio_tokens"`
	MediaTokens int64 `json:"media_tokens"`
}

// Chunk is one event of a streamed answer (object
// "chat.completion.chunk"), as a server writes it.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// Usage is null ([Null]) on every chunk but the
	// last of a stream that asked for usage, where it is a *Usage, and
	// absent (nil) when the stream did not ask.
	Usage any `json:"usage,omitempty"`
}

// ChunkChoice is the choice of a [Chunk].
type ChunkChoice struct {
	Index        int       `json:"index"`
	Delta        Delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// Delta is what a [Chunk] adds to the answer.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is reasoning text (vLLM, DeepSeek; the gateway's
	// agent mode).
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// Event is one of the gateway's agent-mode steps (a JSON object),
	// absent elsewhere.
	Event json.RawMessage `json:"batchagent_event,omitempty"`
}

// ClientChunk is the part of a chunk that a client reads: decoding into
// it skips the id, model and creation time, and costs a quarter of the
// time and allocations of the SDK's ChatCompletionChunk (streams are the
// OpenAI backend's hot path). It reads the error objects that vLLM and
// SGLang send inside a stream, and llama.cpp's timings.
type ClientChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Index        int64  `json:"index"`
		FinishReason string `json:"finish_reason"`
		Delta        struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []struct {
				Index    int64    `json:"index"`
				ID       string   `json:"id"`
				Type     string   `json:"type"`
				Function Function `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage   *ClientUsage    `json:"usage"`
	Timings json.RawMessage `json:"timings"` // llama.cpp
	Error   json.RawMessage `json:"error"`
}

// IsError reports whether the chunk is an error object rather than a
// chunk.
func (c *ClientChunk) IsError() bool {
	return (len(c.Error) > 0 && string(c.Error) != "null") || c.Object == "error"
}

// AppendJSON appends c as json.Marshal writes it, byte for byte. The
// chunks of a streamed text answer (a delta of role and content, a finish
// reason, usage null or absent) are written without reflection: the
// gateway writes one per token. Any other chunk goes through
// json.Marshal.
func (c *Chunk) AppendJSON(b []byte) ([]byte, error) {
	if !c.plain() {
		out, err := json.Marshal(c)
		if err != nil {
			return b, err
		}
		return append(b, out...), nil
	}
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, c.ID, true)
	b = append(b, `,"object":`...)
	b = jsonenc.AppendString(b, c.Object, true)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, c.Created, 10)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, c.Model, true)
	b = append(b, `,"choices":[`...)
	for i := range c.Choices {
		ch := &c.Choices[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(ch.Index), 10)
		b = append(b, `,"delta":{`...)
		sep := false
		if ch.Delta.Role != "" {
			b = append(b, `"role":`...)
			b = jsonenc.AppendString(b, ch.Delta.Role, true)
			sep = true
		}
		if ch.Delta.Content != nil {
			if sep {
				b = append(b, ',')
			}
			b = append(b, `"content":`...)
			b = jsonenc.AppendString(b, *ch.Delta.Content, true)
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		if ch.FinishReason != nil {
			b = jsonenc.AppendString(b, *ch.FinishReason, true)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if c.Usage != nil {
		b = append(b, `,"usage":null`...)
	}
	return append(b, '}'), nil
}

// plain reports whether AppendJSON writes c without reflection: choices
// whose delta has no tool call, reasoning or event and no logprobs, a nil
// Choices slice (JSON null) excepted, and usage absent or [Null].
func (c *Chunk) plain() bool {
	if c.Choices == nil {
		return false
	}
	switch u := c.Usage.(type) {
	case nil:
	case json.RawMessage:
		if string(u) != "null" {
			return false
		}
	default:
		return false
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		if ch.Logprobs != nil || len(d.ToolCalls) > 0 || d.ReasoningContent != "" || d.Event != nil {
			return false
		}
	}
	return true
}
