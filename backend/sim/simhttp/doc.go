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
//
// With [Config.Batch] the server also serves OpenAI's Batch API
// (/v1/files, /v1/batches, through package server/batchapi, on a store in
// a temporary directory): each line is answered by the server's own
// chat-completion handler, outside the account's rate limits, and a batch
// completes no sooner than [Config.BatchDelay] after its creation, as a
// provider's does hours later. GET /sim/batch/stats counts the batches,
// their lines and the custom_ids submitted in more than one batch
// ([BatchStats]), which a run that never pays twice keeps at zero.
package simhttp
