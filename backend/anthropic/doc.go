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
// # Structured output
//
// Structured output ([llm.Request.Output]) is constrained natively, through
// a tool whose input schema is the output schema, named like the output
// (Output.Name, "output" by default). A schema that does not describe an
// object (a tool's input always is one) is wrapped as the property "value"
// and unwrapped in the answer. The tool's input comes back as the message's
// content, as compact JSON, with finish reason stop and never as a tool
// call; any text beside it is dropped.
//
// A request without tools forces the output tool (tool_choice
// {"type":"tool"}). A request with tools offers the output tool after them
// with tool_choice {"type":"any"}: the model must either call one of the
// request's tools or give its final answer through the output tool, so a
// tool-using agent gets native structured output too. The backend never asks
// for extended thinking, which forbids both tool choices (it allows only
// "auto" and "none"), so it needs no fallback to "auto"; a compatible server
// that ignores tool_choice and answers in text gets that text back as the
// answer, for the caller to validate. When a tool of the request already has
// the output's name, the output tool takes the first free name of name_2,
// name_3... (shortened to the API's 64 characters), the same on every turn,
// and a call of the request's tool stays a tool call.
//
// A message that calls request tools and the output tool at once returns
// the calls of the request tools, with the message's text, and drops the
// output call: the model answers again once it has the tools' results, and
// the conversation sent back then holds only the calls the agent answered,
// every tool_use with its tool_result, as the API requires. Streams hold
// the text of an answer with structured output back until the end, since
// the output tool's input may replace it.
//
// # Media
//
// A message's [llm.Part] values become content blocks: an image as an
// image block with a base64 source (bytes, or a data: URL, of type
// image/jpeg, image/png, image/gif or image/webp) or a url source (an
// https URL Anthropic fetches); a document as a document block with a
// base64 source (PDF bytes), a url source, or a file source (a Files API
// id, for which the request names the files-api-2025-04-14 beta), its
// Filename as the title. A tool message's parts go into its tool_result,
// so a tool can show the model an image. The Messages API takes no audio:
// [Model.Capabilities] declares none, and a request carrying a part the
// API cannot take (audio, another image type, a data: URL that does not
// decode) fails with [llm.ErrBadRequest], naming the message and part,
// before anything is sent.
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
// # Message Batches
//
// [Batch] drives Anthropic's Message Batches API (POST /v1/messages/batches)
// as a batchmode.Provider, at half the real-time price. Each request of a
// batch is {"custom_id", "params"}, params being exactly the Messages body
// [Model.Generate] sends; each succeeded result is read as Generate reads an
// answer (usage with cache reads and writes, tool calls, structured output,
// stop reason), an errored one becomes the [*llm.APIError] of the same
// class, and a canceled or expired one wraps batchmode.ErrUnanswered, to be
// asked again. The API takes no files (Upload returns "", Delete does
// nothing) and keeps no metadata, so Find recognises a batch an earlier
// process created only by its request count and creation time, and only
// when exactly one batch matches. The API key goes to a results_url only
// on the base URL's host, and never across a redirect to another host.
// Reading a structured answer needs the request's output tool, which Encode
// remembers by custom_id: a process reading another's batch encodes its
// lines again first.
//
// # Addressing
//
// [ParseURL] reads backend URLs: anthropic:// for the hosted API,
// anthropic+http://host:port and anthropic+https://host:port/path for
// compatible servers; ?mode=batch sets [Config.Mode] to "batch", for
// [NewBatch]. The API key never travels in the URL.
package anthropic
