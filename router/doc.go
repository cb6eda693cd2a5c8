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
// A call that failed with [llm.ErrConnection] — for a stream, before its
// first event — is sent again to another deployment, each at most once,
// before its failure is returned: a deployment that died costs its callers
// nothing while another one lives.
package router
