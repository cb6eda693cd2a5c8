// Package anthropic is the batchagent backend for the Anthropic Messages API
// (POST /v1/messages), built on the official Go SDK
// (github.com/anthropics/anthropic-sdk-go). The same wire format is served by
// llama.cpp's llama-server and by Ollama, so the backend also drives those.
//
// # Requests
//
// A [llm.Request] maps onto one Messages call. System messages become the
// system blocks; tool definitions become tools; user and assistant turns
// become content blocks, assistant tool calls become tool_use blocks and tool
// results become tool_result blocks of a user turn (consecutive results share
// one turn). The last system block and the last tool definition carry a
// cache_control marker, so the prefix shared by every agent of a batch
// (tools and system prompt) is written to Anthropic's prompt cache once and
// read by every later call.
//
// Structured output ([llm.Request.Output]) without tools is constrained
// natively: the request gets one tool whose input schema is the output schema
// and forces the model to call it; the tool's input comes back as the
// message's content, as compact JSON, and never as a tool call. A schema
// that does not describe an object (a tool's input always is one) is wrapped
// as the property "value" and unwrapped in the answer. A request with tools
// is not forced, since the agent may need to call them first.
//
// # Usage and rate limits
//
// Anthropic's input_tokens leaves out cached tokens, so PromptTokens is
// input_tokens + cache_read_input_tokens + cache_creation_input_tokens and
// CachedTokens is cache_read_input_tokens. The anthropic-ratelimit-*
// headers (requests, and tokens or input tokens) become
// [llm.Response.RateLimit], and the first event of a stream.
//
// # Errors
//
// Every failure is an [*llm.APIError] with Backend "anthropic" wrapping one
// of the llm error classes, decided from the HTTP status and Anthropic's
// error type: 429 and rate_limit_error are [llm.ErrRateLimited]; 503, 529 and
// overloaded_error are [llm.ErrOverloaded]; "prompt is too long" and 413 are
// [llm.ErrContextLength]; 401 and 403 are [llm.ErrAuth]. A stream that ends
// before message_stop is [llm.ErrConnection]. A non-streamed body over
// [llm.BodyLimit], or a streamed structured answer (held back until it
// ends) over [llm.AnswerLimit], of the request's token cap is
// [llm.ErrTruncated]: a server that ignores max_tokens. stop_reason
// max_tokens is [llm.FinishLength]. A cancelled context yields the
// context's error. The SDK's own retries are off: the caller retries.
//
// # Addressing
//
// [ParseURL] reads backend URLs: anthropic:// for the hosted API,
// anthropic+http://host:port and anthropic+https://host:port/path for
// compatible servers. The API key never travels in the URL.
package anthropic
