// Package server is batchagent's OpenAI-compatible gateway: an
// http.Handler over a [batchagent.Engine], so clients that speak OpenAI's
// chat completions (the openai Python and TypeScript packages, curl) get
// the engine's admission — adaptive concurrency, rate limits,
// backpressure, the interactive priority class over batch work — and its
// agents.
//
// # Routes
//
//   - POST /v1/chat/completions, streamed (SSE) or not, in OpenAI's wire
//     format: a role chunk, content and tool-call deltas, a finish chunk,
//     a usage chunk when stream_options.include_usage is set, then
//     "data: [DONE]". Errors are OpenAI's error object.
//   - POST /v1/responses (OpenAI's Responses API), streamed or not: the
//     request (input as a string or message and function-call items,
//     instructions, function tools, tool_choice, max_output_tokens,
//     temperature, top_p, text.format) becomes a chat completion run by
//     the same modes; the answer is a Responses object, or its events
//     (response.created ... response.completed). Other fields are a 400
//     unsupported_parameter naming them.
//   - POST /v1/embeddings and POST /v1/completions (legacy): forwarded to
//     a backend that is an [llm.Forwarder] — verbatim to an
//     OpenAI-compatible one (the model renamed to the backend's), answered
//     offline by the simulator — and answered as it answers; a backend
//     that is not one (Anthropic, Bedrock) is a 400 unsupported_endpoint.
//     Both are also Batch API endpoints.
//   - GET /v1/models: the backend models, then "agent:NAME" for each agent;
//     GET /v1/models/{model}: one of them, or 404 model_not_found.
//   - GET /health: 200 while the process serves (liveness).
//   - GET /ready: 200 while the server is not shutting down and every
//     backend that can be probed answers its queue probe; see Server.
//
// # Passthrough
//
// A model named in [Config.Backends] is answered with one model call
// through [batchagent.Engine.Call] in the interactive class. Passed on:
// messages (string or content parts; developer is system), tools,
// tool_choice "none" (which withholds the tools; other choices pass the
// tools as they are), response_format (json_schema and json_object become
// an llm.OutputSpec), max_completion_tokens or max_tokens, temperature,
// top_p, seed and stop. n must be 1. Unknown fields are ignored, as vLLM
// and llama.cpp do.
//
// # Media
//
// A user message's content may carry image_url (an https URL, or a
// base64 data: URL of a PNG, JPEG, GIF or WebP whose bytes are of the
// type it declares; detail auto, low, high or original), input_audio
// (base64 wav or mp3) and file (a PDF as a base64 data: URL, or a
// provider's file_id) parts: they reach the backend as llm.Message.Parts,
// in order with the text parts. A part the routed backend cannot take
// (its llm.Capabilities.Media) is a 400 unsupported_content naming the
// model and the part; a part that cannot be read is a 400 naming the
// message, part and field (messages[0].content[1].image_url.url). The
// gateway never fetches a URL: an https image URL goes to the provider,
// which fetches it. In agent mode the media of the last user message
// follow the agent's task text in its first message
// ([batchagent.Engine.SubmitMedia]); Batch API lines are read the same
// way.
//
// # Agent mode
//
// Model "agent:NAME" runs the agent NAME of [Config.Agents] on the last
// user message: when its text is a JSON object, its fields are the
// agent's input; otherwise the input is {"input": TEXT}, so a task
// template names {input}. While the agent works, each step streams as a
// chunk whose delta has no content but two fields standard clients
// ignore: "reasoning_content", a line of text (shown as reasoning by
// clients that know the field), and "batchagent_event", the step as an
// [Event]: a turn beginning, a tool call with its arguments, a tool's
// result summary or error, a correction sent back to the model. The
// agent's answer then streams as content (its JSON when the agent has an
// output schema) and the usage is the sum over every turn, with its
// "cost" when [Config.Prices] prices the model. A non-streamed
// answer carries the steps under "reasoning_content" and
// "batchagent_events" of its message.
//
// # Errors
//
// 400 for a body that is not JSON, names a key twice or holds text that
// is not UTF-8 (the message names the key's path or the byte's offset),
// or a bad field; 401 for a missing or unknown key (the connection then
// closes); 404 for an unknown model, 408 for a body that did not arrive
// within BodyTimeout, 413 for a body over MaxBodyBytes, 429 with
// Retry-After for a key's limits or a rate-limited backend, 500 for a
// failed agent or a backend's server error, 502 for an unreachable
// backend or a cut connection (backend_unreachable) and for a backend
// that refuses the gateway's credentials (upstream_auth), 503 with
// Retry-After for a draining server, 503 for an overloaded or
// unavailable backend, 504 for a timeout. Every answer carries its
// request's id in the X-Request-Id header. The message of a failure
// upstream says what failed in the API's words and names the request id;
// the cause itself (an upstream address, the variable of a key) goes
// only to the server's log, under "request_id". An error after a stream
// has begun, a connection cut upstream included, is sent as a data line
// holding the error object, without a finish reason and without [DONE]:
// a client never takes a cut answer for a whole one.
//
// # Executor
//
// Each chat completion gets a single-use executor built with the
// request's own parameters (its disconnect signal, its tracer). A mode —
// passthrough or agent — only yields structured chunks; the executor is
// the one place that writes them as SSE or as the JSON answer, appends
// [DONE], buffers the assistant's content from the chunks (reasoning
// events are not content), reports the span's input and output, and
// checks for the client's disconnection: a client that goes away cancels
// the request's context, which stops the backend call or the agent and
// frees its admission slot.
//
// # Batch API
//
// With [Config.Batches] (a [batchapi.Store]: SQLite and the files in one
// directory) the server also serves OpenAI's Batch API, /v1/files and
// /v1/batches, through a [batchapi.Server] whose routes it mounts behind
// its keys (each key owns the files and batches it creates) and whose
// lines it runs through the same executor as a chat completion (never
// streamed) in the batch class, without RequestTimeout: the batch's
// window bounds them. See package batchapi.
//
// # Routing
//
// Routes are http.ServeMux patterns with methods. A known path asked
// with another method is answered 405 (404 on the Batch API, as OpenAI's
// is), an unknown path 404, both in OpenAI's error format; a path that is
// not clean ("//health", "/v1/../ready") is unknown, not redirected.
package server
