// Package openai is batchagent's backend for servers that speak the OpenAI
// chat-completions API: OpenAI itself, vLLM, SGLang, llama.cpp's
// llama-server, Ollama, batchagent's HTTP simulator and any other
// compatible server. It is built on the official SDK
// (github.com/openai/openai-go/v3) with the SDK's retries off: batchagent's
// agent loop owns retries. The SDK is the transport; request bodies are
// written, and stream chunks and error bodies read, by internal/oaiwire,
// the wire format the gateway and the simulator share, held equal to the
// SDK's by its tests.
//
// # Flavors
//
// A [Flavor] names the server. It sets the [llm.Capabilities] the [Model]
// declares (prompt caching, queue probing, a starting concurrency), how the
// token cap is sent (max_completion_tokens to OpenAI, max_tokens to the
// others) and where [Model.QueueDepth] reads Prometheus metrics. [ParseURL]
// maps backend URLs such as "vllm://gpu1:8000?model=qwen" to a [Config].
//
// # Requests
//
// Messages map one to one (assistant tool calls with their IDs, tool
// results linked by tool_call_id), tools become function tools, and
// [llm.Request.Output] becomes response_format json_schema with strict
// false. Tool parameters and the output schema are sent as the raw JSON
// given, so the prefix shared by the agents of a batch stays byte-identical
// and servers' prefix caches hit. Streams ask for
// stream_options.include_usage.
//
// # Media
//
// A message with [llm.Message.Parts] is sent with content parts: text,
// image_url (an https URL, a data: URL, or the image's bytes written as a
// base64 data: URL; with detail when set), input_audio (base64 data with
// format wav or mp3, from the media type) and file (file_data, the
// document as a data: URL, with a filename, "document.pdf" when none is
// given; or file_id). The chat API takes media only in user messages, so
// a tool result that is media (read_file on an image or a PDF) is sent
// as one user message right after the run of tool messages, each tool's
// media introduced by a text part naming its call; the tool message
// keeps its text, or says that its result is the media that follows. A
// part the API cannot take (audio or a document by https URL, an image
// whose data is not image/*, an unknown detail) fails the call with
// [llm.ErrBadRequest] naming the message and the part.
//
// [llm.Capabilities].Media says what each flavor takes, so that a job
// with parts a server cannot read is refused when it opens: the openai
// and sim flavors everything; vllm, sglang, llamacpp and generic images,
// by bytes or URL (their audio and file support varies by version and
// model); ollama images by bytes only (its OpenAI endpoint fetches no
// URL).
//
// # Responses
//
// Usage counts prompt, completion and cached prompt tokens
// (prompt_tokens_details.cached_tokens, or llama.cpp's timings.cache_n when
// the details are absent). The x-ratelimit-* headers become
// [llm.Response.RateLimit] and, in a stream, a first [llm.EventRateLimit].
// finish_reason "length" (Ollama, llama.cpp, vLLM) is [llm.FinishLength].
// A non-streamed body is read no further than [llm.BodyLimit] of the
// request's token cap: past it the call fails with [llm.ErrTruncated] (a
// server that ignores max_tokens); streams are capped by their consumer.
//
// # Errors
//
// Every failure is an [*llm.APIError] whose Backend is the flavor's name
// ("openai" for the generic flavor) and whose Err is a class sentinel: 429
// [llm.ErrRateLimited]; 503 and 529 [llm.ErrOverloaded]; 408 and 504
// [llm.ErrTimeout]; other 5xx and malformed bodies [llm.ErrServer]; 401 and
// 403 [llm.ErrAuth]; 4xx saying the prompt exceeds the context window
// [llm.ErrContextLength]; other 4xx [llm.ErrBadRequest]; refused, reset or
// cut connections, and streams that end before "data: [DONE]",
// [llm.ErrConnection]; a body over its size cap [llm.ErrTruncated]. RetryAfter comes from retry-after-ms or Retry-After.
//
// One deliberate exception: llama.cpp answers a request body it cannot
// parse with HTTP 500 and a "[json.exception..." message. Resending the
// same body fails the same way, so that is [llm.ErrBadRequest] (permanent),
// not ErrServer. Likewise OpenAI's 429 insufficient_quota is ErrBadRequest:
// no wait cures an empty account.
//
// A cancelled context yields an error wrapping the context's error, not an
// APIError. The API key never appears in an error.
//
// # Batch API
//
// [NewBatch] returns a [Batch], the batchmode.Provider of OpenAI's Files
// and Batches API (backend URL openai://?mode=batch, or
// openai+https://HOST/v1?mode=batch and sim+http://HOST:PORT?mode=batch
// for servers that serve it): a submission is a JSONL file uploaded with
// purpose batch whose lines carry the very body [Model.Generate] sends,
// run as a batch of /v1/chat/completions with a 24h completion window at
// half the price; results are read back from the output and error files
// by custom_id and decoded as Generate decodes an answer. A line's HTTP
// status gets the class Generate gives it; a line the batch did not run
// (batch_expired, batch_cancelled) wraps batchmode.ErrUnanswered; a
// malformed line fails alone. vLLM, SGLang, llama.cpp and Ollama have no
// batch API: their URLs refuse mode=batch.
package openai
