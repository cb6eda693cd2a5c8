// Package sim is a deterministic simulator of an agentic LLM behind an
// inference server, for tests, examples and benchmarks where no GPU is
// present. It is not a mock of batchagent's types: it is an [llm.Model] (and
// [llm.Streamer]) that drives any job without scripting.
//
// # Behaviour
//
// On the first [Config.ToolTurns] turns of a conversation the simulated
// model calls the request's tools (all of them, or those named in
// [Config.Tools]) with arguments generated from each tool's parameter
// schema. A string argument whose name appears in the user's message as
// "name: value" or "name=value" takes that value, the way a real model
// copies a path or an ID from its task; otherwise enum, const, default and
// examples are honoured, and anything else is generated.
//
// After that it answers. With an output schema ([llm.Request.Output]) the
// answer is a JSON value generated from the schema, deterministic for a
// given seed and task text, so reruns produce identical outputs. A share of
// answers ([Config.InvalidRate]) violate the schema, to exercise the
// caller's validation and retry path.
//
// # Timing and failures
//
// Each call takes [Config.Latency] (one forward pass) plus
// [Config.PerToken] per generated token, scaled by a seeded jitter. A share
// of calls ([Config.FailRate]) fail with a transient overload error after
// one forward pass, as a busy server answers 503.
//
// # Addressing
//
// [ParseURL] reads the "sim://" URL form used by jobs and the CLI, e.g.
// "sim://?latency=60ms&tool_turns=1&fail=0.02&seed=1".
//
// # Over HTTP
//
// Package [github.com/batchagent/batchagent/backend/sim/simhttp] serves the
// same model as an OpenAI-compatible chat-completions server (`batchagent
// sim serve`) whose timing models a continuous-batching GPU server. Its
// answers are this package's [Model]'s, and it counts tokens with the same
// simulated tokenizer ([Tokens]).
package sim
