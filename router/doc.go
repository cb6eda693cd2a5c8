// Package router serves one model name from several deployments: a
// [Router] is an llm.Model over several llm.Models (the same model on
// several URLs, keys or regions) that sends each call to the least-loaded
// healthy one.
//
// # Choosing a deployment
//
// Each call goes to the deployment with the lowest load, its calls in
// flight divided by its limit; among equally loaded ones, to the lowest
// observed latency (an EWMA of its answered calls) divided by its weight.
// A deployment whose calls are all in use is skipped; when every healthy
// one is full, the call waits for a slot (or for its context).
//
// # Admission per deployment
//
// Every deployment keeps its own admission: an in-flight limit that
// adapts (AIMD: halved when it answers rate-limited or overloaded, raised
// by one after a limit's worth of clean calls, never above MaxInflight),
// an optional requests-per-minute budget, and a circuit breaker
// (github.com/sony/gobreaker) that opens after FailureThreshold
// consecutive connection failures, timeouts or 5xx, stays open Cooldown,
// then lets one probe through (half-open) and closes when it succeeds.
//
// # Failing over
//
// A call whose deployment fails it before the caller has seen any of the
// answer is sent again to another deployment, each at most once, before
// its failure is returned: a deployment that died costs its callers
// nothing while another one lives. That covers a deployment that could
// not be reached, one that died mid-answer (the request sent, the
// connection reset or the body cut before its end: [llm.ErrConnection],
// or [llm.ErrServer] for a body without a length that no longer parses),
// and one answering 502 ([llm.ErrConnection]), 503 ([llm.ErrOverloaded])
// or another 5xx ([llm.ErrServer]). A timeout is not run again (the call
// has spent its time; the engine's retry decides), nor is a refused
// request (4xx), which every deployment would refuse alike.
//
// A stream is started again elsewhere only while it has yielded nothing
// but rate-limit reports. A stream cut after its first content event is
// not replayed: the caller has seen part of the answer, which cannot be
// taken back, so the stream ends with the cut's error. A caller that
// shows nothing until the answer is whole says so with
// [llm.WithWholeAnswer] (the gateway does, for a non-streamed request,
// which the engine makes as a stream): the router then holds the events
// back until the deployment's stream ends, and a stream cut mid-answer
// runs again on another deployment, as Generate's calls do. Likewise Forward
// (embeddings, legacy completions) holds its deployment until the
// answer's headers: a body cut after them reaches the caller as it is.
//
// Only connection failures, timeouts and 5xx count against a
// deployment's breaker; a 503 (overloaded) halves its in-flight limit
// instead, as a 429 does.
package router
