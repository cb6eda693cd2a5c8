package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// readCompletion reads the body of raw, a non-streamed chat completion to
// a request with the token cap maxTokens, answered under ctx, and decodes
// it. A failed read is classified as transportError does. A body over
// llm.BodyLimit(maxTokens) is not read further: its error wraps
// llm.ErrTruncated (a server that ignored the token cap).
func (m *Model) readCompletion(ctx context.Context, raw *http.Response, maxTokens int) (*llm.Response, error) {
	limit := llm.BodyLimit(maxTokens)
	body, err := io.ReadAll(io.LimitReader(raw.Body, limit+1))
	if err != nil {
		return nil, m.transportError(ctx, err)
	}
	if int64(len(body)) > limit {
		return nil, &llm.APIError{Backend: m.name, StatusCode: raw.StatusCode, Message: (&llm.SizeError{Limit: limit, MaxTokens: maxTokens}).Error(), Err: llm.ErrTruncated}
	}
	return m.decodeCompletion(raw.StatusCode, body)
}

// decodeCompletion parses a non-streamed chat completion. A body that is
// not a JSON object with at least one choice is ErrServer.
func (m *Model) decodeCompletion(status int, body []byte) (*llm.Response, error) {
	var c oa.ChatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, m.errorf(status, llm.ErrServer, "malformed response: %v", err)
	}
	if rawField(c.JSON.ExtraFields["error"]) != nil || c.Object == "error" {
		return nil, m.inlineError(body)
	}
	if len(c.Choices) == 0 {
		return nil, m.errorf(status, llm.ErrServer, "malformed response: no choices")
	}
	ch := c.Choices[0]
	msg := llm.Message{Role: llm.RoleAssistant, Content: ch.Message.Content}
	if msg.Content == "" {
		msg.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args(tc.Function.Arguments)})
	}
	var wu *oaiwire.ClientUsage
	if c.JSON.Usage.Valid() {
		wu = &oaiwire.ClientUsage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
		if d := c.Usage.PromptTokensDetails; c.Usage.JSON.PromptTokensDetails.Valid() {
			td := &oaiwire.TokenDetails{AudioTokens: d.AudioTokens}
			if d.JSON.CachedTokens.Valid() {
				td.CachedTokens = &d.CachedTokens
			}
			if raw := rawField(d.JSON.ExtraFields["media_tokens"]); raw != nil {
				_ = json.Unmarshal(raw, &td.MediaTokens) // not a number: none reported
			}
			wu.PromptTokensDetails = td
		}
	}
	u, _ := usage(wu, rawField(c.JSON.ExtraFields["timings"]))
	extra, _ := oaiwire.ReadAnswerExtra(body) // body decoded above: a JSON object
	return &llm.Response{
		Message:      msg,
		FinishReason: finishReason(ch.FinishReason, len(msg.ToolCalls) > 0),
		Usage:        u,
		Extra:        extra,
	}, nil
}

// args returns a tool call's arguments as the model wrote them, "{}" when
// it wrote none.
func args(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

// finishReason maps a server's finish reason. Unknown reasons pass through;
// an empty one, or "stop" alongside tool calls, is inferred from whether
// the answer calls tools.
func finishReason(s string, hasCalls bool) llm.FinishReason {
	switch s {
	case "tool_calls", "function_call", "tool_use":
		return llm.FinishToolCalls
	case "length", "max_tokens", "model_length":
		return llm.FinishLength
	case "", "stop", "eos", "end_turn", "stop_sequence":
		if hasCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	default:
		return llm.FinishReason(s)
	}
}

// timings is the part of llama.cpp's "timings" object that counts tokens:
// prompt_n prompt tokens evaluated, cache_n served from the prefix cache,
// predicted_n generated.
type timings struct {
	PromptN    *int64 `json:"prompt_n"`
	CacheN     *int64 `json:"cache_n"`
	PredictedN *int64 `json:"predicted_n"`
}

// usage returns the token counts of a response and whether it reported
// any. u is its usage object, nil when absent; rawTimings is llama.cpp's
// timings object, nil when absent. Cached tokens come from
// prompt_tokens_details.cached_tokens, or else from timings.cache_n;
// without a usage object, the timings alone give all three counts.
func usage(u *oaiwire.ClientUsage, rawTimings []byte) (llm.Usage, bool) {
	var t timings
	hasTimings := len(rawTimings) > 0 && string(rawTimings) != "null" && json.Unmarshal(rawTimings, &t) == nil
	if u == nil {
		if !hasTimings || t.PromptN == nil || t.PredictedN == nil {
			return llm.Usage{}, false
		}
		cached := deref(t.CacheN)
		return llm.Usage{PromptTokens: *t.PromptN + cached, CompletionTokens: *t.PredictedN, CachedTokens: cached}, true
	}
	out := llm.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	switch {
	case u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens != nil:
		out.CachedTokens = *u.PromptTokensDetails.CachedTokens
	case hasTimings:
		out.CachedTokens = deref(t.CacheN)
	}
	if d := u.PromptTokensDetails; d != nil {
		// batchagent's media_tokens counts every medium; OpenAI's
		// audio_tokens counts audio alone (images are not reported).
		out.MediaTokens = max(d.MediaTokens, d.AudioTokens)
		out.MediaTokens = min(max(out.MediaTokens, 0), out.PromptTokens)
	}
	return out, true
}

// rawField returns the raw JSON of a response field the SDK has no struct
// field for, nil when it was absent or null. (The SDK marks such fields as
// not Valid even when they are well-formed, so their raw text decides.)
func rawField(f respjson.Field) []byte {
	r := f.Raw()
	if r == "" || r == "null" {
		return nil
	}
	return []byte(r)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// rateLimit reads the x-ratelimit-* headers of a response; nil when there
// are none.
func rateLimit(h http.Header) *llm.RateLimitInfo {
	var rl llm.RateLimitInfo
	found := false
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"x-ratelimit-limit-requests", &rl.LimitRequests},
		{"x-ratelimit-remaining-requests", &rl.RemainingRequests},
		{"x-ratelimit-limit-tokens", &rl.LimitTokens},
		{"x-ratelimit-remaining-tokens", &rl.RemainingTokens},
	} {
		if n, err := strconv.ParseInt(strings.TrimSpace(h.Get(f.key)), 10, 64); err == nil && n >= 0 {
			*f.dst = n
			found = true
		}
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{
		{"x-ratelimit-reset-requests", &rl.ResetRequests},
		{"x-ratelimit-reset-tokens", &rl.ResetTokens},
	} {
		if d, ok := resetDuration(h.Get(f.key)); ok {
			*f.dst = d
			found = true
		}
	}
	if !found {
		return nil
	}
	return &rl
}

// resetDuration parses a reset header: a Go-style duration as OpenAI sends
// ("1s", "6m0s", "20ms") or a number of seconds.
func resetDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, true
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e9 {
		return time.Duration(s * float64(time.Second)), true
	}
	return 0, false
}
