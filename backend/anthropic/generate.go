package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/batchagent/batchagent/llm"
)

// Generate sends req as one Messages call and returns the answer, with the
// rate limits the response reported. req is not modified. Failures are
// *llm.APIError values wrapping an llm error class (llm.ErrBadRequest,
// without any request sent, for a schema that is not a JSON object); once
// ctx is done the error is ctx's own. Generate makes at most one HTTP
// request, bounded at an hour unless ctx ends sooner.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	c, err := m.translate(req)
	if err != nil {
		return nil, err
	}
	// The body is read no further than its size cap: a server that
	// ignores max_tokens fails with llm.ErrTruncated.
	var (
		x    = exchange{limit: true, maxTokens: int(c.params.MaxTokens)}
		body []byte
	)
	// The body is decoded here rather than by the SDK, so that a malformed
	// one is told apart from a connection cut while reading it.
	_, err = m.client.Messages.New(ctx, c.params, c.options(x.option(),
		option.WithResponseBodyInto(&body), option.WithRequestTimeout(requestTimeout))...)
	if err != nil {
		return nil, m.callError(ctx, &x, err)
	}
	var msg sdk.Message
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, m.newError(0, fmt.Sprintf("malformed response: %v", err), llm.ErrServer, 0)
	}
	if msg.Type == "error" {
		// An error envelope under a success status.
		return nil, m.statusError(0, nil, string(body), "")
	}
	resp := c.response(&msg)
	if x.resp != nil {
		resp.RateLimit = rateLimit(x.resp.Header, time.Now())
	}
	return resp, nil
}

// response converts an answer of the API.
func (c *call) response(msg *sdk.Message) *llm.Response {
	var (
		text   string
		output []byte
		found  bool
		calls  []llm.ToolCall
	)
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text += b.Text
		case "tool_use":
			if c.output != "" && b.Name == c.output {
				if !found {
					output, found = b.Input, true
				}
				continue
			}
			args := json.RawMessage(b.Input)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			calls = append(calls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	r := &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: calls},
		Usage:   usageOf(msg.Usage.InputTokens, msg.Usage.CacheReadInputTokens, msg.Usage.CacheCreationInputTokens, msg.Usage.OutputTokens),
	}
	// An answer given alongside calls of real tools is dropped: the model
	// answers again once it has their results, and the conversation sent
	// back then holds only the calls the agent answered.
	if found && len(calls) == 0 {
		r.Message.Content = outputText(output, c.wrapped)
	}
	r.FinishReason = finishReason(msg.StopReason, len(calls) > 0)
	return r
}

// usageOf returns the usage of a call. Anthropic's input_tokens excludes
// the prompt tokens read from or written to the cache.
func usageOf(input, cacheRead, cacheCreation, output int64) llm.Usage {
	return llm.Usage{
		PromptTokens:     input + cacheRead + cacheCreation,
		CompletionTokens: output,
		CachedTokens:     cacheRead,
		CacheWriteTokens: cacheCreation,
	}
}

// finishReason maps a stop_reason. tool_use means tool calls only when the
// answer has some: a call of the output tool alone is a final answer.
func finishReason(stop sdk.StopReason, hasCalls bool) llm.FinishReason {
	switch stop {
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return llm.FinishLength
	}
	if hasCalls {
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}
