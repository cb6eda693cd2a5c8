// Package llm is the provider-neutral vocabulary of batchagent: messages, tool
// calls, requests, responses, streamed events and token usage, plus the [Model]
// seam that every backend satisfies and the error classes that drive retries.
//
// # The Model seam
//
// A backend (OpenAI-compatible servers, Anthropic, Bedrock, the simulator) is
// any value that implements [Model]. A [Streamer] can also stream; callers
// discover it with a type assertion, like [net/http.Flusher].
//
// # Errors
//
// Backends report failures as [*APIError] values that wrap one of the class
// sentinels ([ErrRateLimited], [ErrOverloaded], ...). Callers decide what to
// retry with [errors.Is] and [IsTransient], never by matching strings.
//
// The package imports only the standard library.
package llm
