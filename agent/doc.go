// Package agent runs one agent's multi-turn loop: model → tools → validate →
// repeat, until a final answer that satisfies the output schema or a limit.
//
// A [Runner] holds what all agents of a job share (model, tool pool, schema,
// the shared prompt prefix) and is safe for concurrent use; each agent is one
// call of [Runner.Run] over its own [State]. Run is synchronous: concurrency
// belongs to the caller.
//
// # The inference slot
//
// The only scarce resource is the backend's capacity, guarded by a [Gate].
// An agent holds a slot only while its model call runs: it
// releases it before tool calls, before back-off sleeps and before output
// validation. The slot is requested with the number of turns already done as
// priority, so agents close to done are served first.
//
// # Failures
//
// Transient backend errors ([llm.IsTransient]) are retried with exponential
// back-off and jitter, up to [Config.MaxRetries] times per call. Tool errors
// are sent back to the model as tool results. A final answer that does not
// match the output schema is sent back with the list of problems, up to
// MaxRetries times. Only what cannot be recovered ends the agent, as an
// [*Error] that says which step failed.
package agent
