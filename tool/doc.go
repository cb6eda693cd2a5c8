// Package tool runs the tool calls of many LLM agents through one shared
// [Pool]: the tools a job offers, the calls its agents make, and the work
// that is saved when many agents make the same call.
//
// # Tools
//
// A [Tool] has a [Spec] (name, description, JSON Schema of its arguments,
// and whether its results may be cached) and a Call method. [Func] turns a
// function into a Tool; [ReadFile] is the built-in read_file tool, confined
// to a set of root directories with [os.Root].
//
// # Coalescing and caching
//
// Thousands of agents of one job often make the same call at the same time,
// such as reading the same file. [Pool.Call] canonicalises the arguments
// (sorted keys, no insignificant whitespace), so calls that differ only in
// formatting are identical, and identical calls that overlap in time share
// one execution. Every caller waits on its own context: a caller that gives
// up returns at once, and the execution is cancelled only when every caller
// waiting for it has left. Successful results of tools marked
// [Spec.Cacheable] are then kept in a bounded LRU cache with a TTL.
//
// # Failures
//
// Tool failures are data: [Pool.Call] returns them as a [*CallError] that
// the agent turns into an error tool result for the model. A panicking tool
// yields a [*PanicError]; a tool that wraps [ErrFatal] asks the agent to
// stop instead. [Pool.Stats] counts, per tool, the calls requested,
// executed, coalesced, answered from the cache and failed.
//
// The package imports only the standard library and
// github.com/hashicorp/golang-lru/v2.
package tool
