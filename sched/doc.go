// Package sched bounds how many inference calls run at once and decides who
// goes next.
//
// A [Scheduler] is a resizable counting semaphore whose waiters are served by
// priority. batchagent gives each agent's model call a priority equal to the
// turns it has completed, so agents that are close to done get the next free
// slot before fresh ones start and results stream out early. Among equal
// priorities waiters are served first come, first served. Above priority
// sits the [Class]: a waiter of a higher class (Interactive) is always served
// before any waiter of a lower one (Batch), whatever their priorities.
//
// A [Gate] is what one backend's callers share: a Scheduler whose limit an
// [AIMD] adapts, the request and token budgets of a [Rate], prefix warming,
// backpressure from the backend's queue, pauses after congestion answers and
// connection failures, and the detection of a backend that is down from a
// [Run]'s start. One Gate serves every job on a backend. Where several
// processes call one backend, each one's Gate also waits on a budget and a
// concurrency limit they share ([Shared], [SharedSlots]; package queue
// keeps them in Redis).
//
// # No starvation
//
// Within a class, priority is converted into an arrival credit: a waiter
// with priority p is ordered as if it had arrived p × [Config.Boost] rounds
// earlier than it did. A higher priority therefore wins over any wait
// shorter than the difference in credit, and any waiter is eventually
// overtaken by nobody: once it has waited longer than the largest credit
// in use, every later arrival is ordered behind it.
//
// Waits are measured in rounds, not in seconds: a round passes each time
// the scheduler has granted as many slots as its limit, about one call's
// duration while the slots are full. The order of the waiters therefore
// does not depend on how fast the backend is. On a clock of seconds, a
// credit that keeps an agent's turns together against a server answering
// in 50 ms would, against one answering in 1 s, let fresh agents overtake
// half-done ones twenty times sooner, and interleave them all.
//
// # Policies
//
// How the waiters of a flow are ordered is the scheduler's [Policy]:
// [PolicyTurns] as above (the default), [PolicyFIFO] (arrival alone), or
// [PolicyLAS], least attained service first: the waiter that has received
// the least service so far ([Order.Attained], for an agent its model time)
// goes first, ties in arrival order. LAS favours short jobs without
// knowing their lengths; a long job is not starved, only served behind
// younger ones. Under every policy a waiter marked [Order.Continuing] goes
// before the others of its flow: an agent back from a short tool call,
// whose prompt prefix the server most likely still caches, is served while
// it does.
//
// The package knows nothing about LLMs; besides the standard library it
// imports only golang.org/x/time/rate.
package sched
