// Package batchagent runs many LLM agents in parallel: input list in,
// structured result list out.
//
// A [Job] describes the work: a model, a system prompt, a task template with
// {field} placeholders, tools and an output JSON Schema. Each input (a row
// of fields) becomes one agent that may take several turns and call tools;
// every input yields exactly one [Result], successful or carrying an
// [*AgentError] with a [Kind].
//
//	results, err := batchagent.Run(ctx, job, batchagent.Slice(inputs))
//
// [Run] returns the results in input order; [Stream] yields them as they
// complete, with memory bounded by [Job.MaxActive] however many inputs a
// lazy source ([JSONL], [CSV]) provides.
//
// # How it runs fast
//
// An inference slot ([Job.MaxInflight]) is held only while the model works:
// tool waits, retry back-off and output validation never hold one. Agents
// with more turns done get the next free slot. The shared prompt prefix
// (system prompt, tool definitions, output instructions) is byte-identical
// across agents and comes first, so backends' prefix caches hit. Identical
// tool calls in flight are executed once, and results of cacheable tools are
// reused.
//
// # Failures are data
//
// Transient backend errors are retried with back-off, tool errors go back to
// the model, and invalid outputs are sent back with the list of problems.
// What remains is reported per input in [Result.Err]; Run returns an error
// only for a bad job.
//
// The root package only wires the parts: [job] (templates and inputs),
// [agent] (one agent's loop), [sched] (slots), [tool] (tools and the pool),
// [schema] (structured output) and [llm] (the provider-neutral vocabulary
// and the Model seam). Backends such as [github.com/batchagent/batchagent/backend/sim]
// plug in as llm.Model values. Satellite packages build on the root's
// public API: [github.com/batchagent/batchagent/reduce] combines a job's
// outputs into one, hierarchically.
package batchagent
