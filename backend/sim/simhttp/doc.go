// Package simhttp serves the simulated model of
// [github.com/batchagent/batchagent/backend/sim] as an OpenAI-compatible
// chat-completions server (`batchagent sim serve`) whose timing models a
// continuous-batching GPU server: bounded running sequences, chunked
// prefill of uncached prompt tokens, a prefix cache, decode steps that slow
// down with the batch, a queue and 429s when it overflows, and /metrics
// with vLLM's gauge names. Any client, batchagent's or another, can be
// measured against it.
//
// The answers (which tool is called on which turn, with which arguments,
// and the final JSON, packed answers and their corrupted entries
// included) are those of a [sim.Model] built from
// [Config.Model]; this package adds only the wire format (the types of
// internal/oaiwire, with a chunk writer of its own for the streams'
// hot path), the timing model of [Server] and the injected faults
// ([Fault]). [Serve] serves a Server on a listener until its context
// ends, then shuts down gracefully (`batchagent sim serve`).
package simhttp
