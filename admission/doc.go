// Package admission configures how an engine admits model calls to each
// backend: the inflight limit (adaptive, or fixed), rate limits per
// process or shared through Redis, backpressure from a self-hosted
// server's queue, the order of the calls that wait (Policy), prefix
// warming, the start window that declares a backend unavailable, and the
// circuit breaker that lets jobs with fallbacks skip a dead backend.
//
// A [Config] is given to batchagent.Config (Admission, or per backend in
// Backends; the root package names these types Admission, RateLimit,
// Backpressure, Policy, Breaker, Backend and BackendStats). [Config.Gate]
// turns it into package sched's gate settings for one backend: the
// admission mechanism itself (slots, AIMD, rate budgets, pauses) lives in
// sched, which knows nothing of models.
package admission
