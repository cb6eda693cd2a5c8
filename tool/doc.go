// Package tool runs the tool calls of many LLM agents through one shared
// [Pool]: the tools a job offers, the calls its agents make, and the work
// that is saved when many agents make the same call.
//
// # Tools
//
// A [Tool] has a [Spec] (name, description, JSON Schema of its arguments,
// and whether its results may be cached) and a Call method. [Func] turns a
// function into a Tool. Tools are built in subpackages, one per kind, so
// that library users link only the ones they use:
//   - tool/filetool: read_file, which returns a text file, and list_dir,
//     which lists a directory, both confined to root directories;
//   - tool/httptool: http_get, which fetches a URL from a host on an
//     allowlist, never from a private address unless allowed;
//   - tool/sqltool: sql_query and a batched keyed lookup on a SQL database;
//   - tool/mcptool: the tools served by an MCP server.
//
// A tool that holds resources open, such as read_file and list_dir with
// their root directories, implements [io.Closer]; its owner closes it after
// the Pool's last call.
// The built-in tools' default size limits fit within the pool's default
// [PoolConfig.MaxResultBytes], so their results reach the model as the
// tools made them.
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
// [Spec.Cacheable] are then kept in a bounded LRU cache with a TTL, and,
// with [PoolConfig.Shared], in a [Cache] shared with other processes (in
// Redis: package queue's ToolCache), so that workers run such a call once
// between them.
//
// # Limits and batching
//
// [PoolConfig.Policies] gives a tool a [Policy]: a token-bucket rate, a
// concurrency limit, its own timeout, or no coalescing for tools that must
// run on every call. Limits apply to executions, after coalescing and
// caching, so a cache hit or a coalesced call never waits for them; a call
// waiting for a rate token or a concurrency slot holds nothing else, and its
// caller can leave on its own context. A [Batcher] (see [BatchFunc]) is a
// tool whose calls can run together: the calls that arrive within
// [Policy.BatchWindow], up to [Policy.BatchMax], execute as one CallBatch
// under one rate token, one concurrency slot and one timeout, and each
// caller receives its own [Result].
//
// # Media
//
// A [MediaTool] returns media with its text: images, PDFs, recordings as
// [llm.Part] values (read_file does, for images and PDFs under its roots).
// [Pool.CallMedia] returns them; [Pool.Call] returns the text alone.
// Coalesced callers and cache hits share the parts, which are read-only.
// [PoolConfig.MaxResultBytes] cuts a result's text, while its media, which
// cannot be cut, are bounded by [PoolConfig.MaxMediaBytes] (the bytes of
// every part's Data and URL together, 20 MiB by default): a result over
// it fails the call with an error naming its size and the limit. Media
// results are cached locally like text ones but never stored in the
// shared cache.
//
// # Failures
//
// Tool failures are data: [Pool.Call] returns them as a [*CallError] that
// the agent turns into an error tool result for the model. A panicking tool
// yields a [*PanicError]; a tool that wraps [ErrFatal] asks the agent to
// stop instead. [Pool.Stats] counts, per tool, the calls requested,
// executed, coalesced, answered from the cache and failed, and the batches
// run.
//
// The package imports only the standard library, golang.org/x/sync,
// golang.org/x/time and github.com/hashicorp/golang-lru/v2.
package tool
