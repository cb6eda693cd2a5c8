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
// priority; the gate's policy decides what that counts for (the engine's
// default serves calls in arrival order, an agent back from a quick tool
// call first).
//
// # Tools start mid-stream
//
// With a streaming model, a tool call starts 1 ms after the stream says
// its arguments are complete ([llm.EventToolCallDone]), through the same
// tool pool, while the rest of the answer streams; calls not started by the
// stream's end start then, and the turn waits for all. (The millisecond
// lets a call that ends the answer, as most do, run on the agent's own
// goroutine instead of one of its own: at 10,000 agents those goroutines
// cost a sixth of the run's CPU and 30 MB.) Results go into the
// conversation in call order whatever order they finish in. The slot is
// still released when the stream ends: tools never hold it. If the model
// call then fails and is retried, or the answer is cut off at the token
// cap, the early executions are cancelled and their results dropped (a
// coalesced execution shared with other agents goes on for them); a call
// whose arguments changed after it started is run again with the final
// ones. A turn's tool time runs from the first tool's start to the last
// one's end, and so may overlap its inference time. Only idempotent tools
// start early ([tool.Pool.Idempotent]): a call of a tool whose policy sets
// NoCoalesce, or whose Spec sets NotIdempotent (an MCP tool its server
// does not declare idempotent), waits for the answer's end, since a cut
// stream would have it run, and the model's answer asked again would run
// it a second time.
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
