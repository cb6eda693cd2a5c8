// Package respcache answers model calls from earlier runs: a cross-run
// cache of responses keyed by the canonical form of their request.
//
// A [Cache] keeps its answers in a [Store]: a SQLite file ([Open]; WAL
// mode, with a busy timeout, so that several processes may share it), or
// a store several machines share ([New] with queue.ResponseStore, in
// Redis), under the same rules. [Cache.Wrap] returns an llm.Model that
// answers a request seen before from the file and passes any other to the
// model it wraps, storing its answer when it is complete: finish reason
// stop or tool_calls, no error, the stream read to its end. The key is
// the SHA-256 of the request's model name, messages (media parts by the
// hash of their bytes), tools, output schema and sampling settings
// (temperature, top_p, seed, stop, max_tokens), encoded as JSON with
// sorted keys. A request sampled at a temperature above zero without a
// seed is passed through uncached unless [Config.Nondeterministic] is
// set: its answers are meant to differ.
//
// A cached answer costs nothing: its Usage is zero, and the tokens the
// original call used are counted as saved, in [Cache.Stats] and in the
// [Tally] of the context the call was made under.
package respcache
