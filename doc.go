// Package batchagent runs many LLM agents in parallel: input list in,
// structured result list out.
//
// A [Def] describes a job: a model, a system prompt, a task template with
// {field} placeholders, tools and an output JSON Schema. [NewSpec] compiles
// it, once, into an immutable [Spec]. Each input (a row of fields) becomes
// one agent that may take several turns and call tools; every input yields
// exactly one [Result], successful or carrying an [*AgentError] with a
// [Kind].
//
//	engine, err := batchagent.New(batchagent.Config{})
//	spec, err := batchagent.NewSpec(batchagent.Def{Model: model, Task: "Rate {text}"})
//	results, err := engine.Run(ctx, spec, batchagent.Slice(inputs))
//
// An [Engine] is long-lived and shared: many runs and submissions at once,
// on many specs. [Engine.Run] returns results in input order;
// [Engine.Stream] yields them as they complete, with memory bounded by
// [Config.MaxActive] however many inputs a lazy source ([JSONL], [CSV])
// provides; [Engine.Submit] starts one agent and returns a [Handle] at
// once, for real-time loops; [Engine.Shutdown] stops gracefully. The
// package-level [Run], [Stream] and [RunTyped] run one spec on a fresh
// engine.
//
// # How it runs fast
//
// Every job on an engine whose spec names the same backend shares that
// backend's admission ([Admission]): one adaptive inflight limit, one rate
// budget, one queue probe, one prefix warm-up. An inference slot is held
// only while the model works: tool waits, retry back-off and output
// validation never hold one. [Interactive] work gets the next free slot
// before [Batch] work; concurrent batch runs take turns; within a run,
// calls are served by [Admission.Policy] (by default the agent with the
// most turns done first, so few agents are in flight at once and the
// server keeps their prompts cached; optionally an agent back from a tool
// call within [Admission.Continuation] first). The shared prompt prefix (system
// prompt, tool definitions, output instructions) is byte-identical across
// agents and comes first, so backends' prefix caches hit. Identical tool
// calls in flight are executed once, and results of cacheable tools are
// reused.
//
// # Failures are data
//
// Transient backend errors are retried with back-off, tool errors go back to
// the model, and invalid outputs are sent back with the list of problems.
// What remains is reported per input in [Result.Err]; Run returns an error
// only for a bad job.
//
// The root package only wires the parts: [job] (specs, templates, inputs
// and results), [agent] (one agent's loop), [sched] (admission: slots,
// AIMD, rate, the per-backend gate), [tool] (tools and the pool), [schema]
// (structured output) and [llm] (the provider-neutral vocabulary and the
// Model seam). Backends such as
// [github.com/batchagent/batchagent/backend/sim] plug in as llm.Model
// values. Satellite packages build on the root's public API:
// [github.com/batchagent/batchagent/reduce] combines a job's outputs into
// one, hierarchically.
package batchagent
