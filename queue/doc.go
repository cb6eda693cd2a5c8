// Package queue spreads the inputs of a run over worker processes and
// hosts through Redis Streams, and keeps the run's results and its agents'
// checkpointed states in the same Redis.
//
// A coordinator registers a run ([Client.CreateRun]) and enqueues its
// inputs ([Client.Enqueue]) into one task stream shared by all runs.
// Workers read tasks through one consumer group ([Client.Read]), run each
// input's agent with its state checkpointed per turn ([Client.Checkpointer]),
// record its result ([Client.Record]) and only then acknowledge the task
// ([Client.Ack]). The coordinator follows the results as they are recorded
// ([Client.Results]).
//
// # Worker and Coordinator
//
// Those calls make two long-lived components, each with a blocking Run
// that a Go program starts in its own process (the batchagent command's
// `worker` and `run --redis` are built on them):
//
//   - [Worker] serves the queue until its context ends: it heartbeats,
//     reads and reclaims tasks while it holds fewer than MaxActive, runs
//     each on the engine of its run (built from what [WorkerConfig.Open]
//     returns, checkpointing into Redis), touches the tasks it holds,
//     records each result and acks its task. Stopping, it lets the turns
//     in flight finish for up to its Grace, releases the unfinished tasks
//     and leaves.
//   - [Coordinator] registers a run, enqueues its inputs within a window
//     of tasks without a result, follows the results and hands each to the
//     caller's Sink once (the output file is the caller's), heartbeats on
//     the run and reports its progress ([Coordinator.Stats]). It waits out
//     Redis outages up to its outage budget, registers the run again when
//     Redis lost it, and runs failed inputs again on request
//     ([Coordinator.Failed], [Coordinator.Retry]). [IndexSet] holds the
//     indexes the output has.
//
// A worker's Open may share its job's limits with every other worker
// ([Client.ShareLimits]): rpm and tpm one budget in Redis ([SharedRate]),
// max_inflight one adaptive limit on the calls in flight ([SharedSlots]).
//
// examples/scaleout-library runs both in one program.
//
// [Client.Status] is a snapshot of every run and worker, for a status
// display.
//
// # Delivery guarantees
//
// Delivery is at least once: a task stays pending in the group, held by
// the worker that read it, until that worker acks it. A worker that dies
// leaves its tasks pending; another worker takes them over with
// [Client.Reclaim] once they have been idle for the visibility timeout,
// and continues each agent from its last checkpointed turn (a finished
// agent's result comes back from its saved state, without model calls).
//
// Results are exactly once: [Client.Record] stores the line of (run, input
// index) only the first time, in one Lua script that also counts it and
// appends it to the run's results stream, so a task delivered twice (a
// worker presumed dead that was only slow) never produces a second result.
// A worker acks a task after recording its result, so a crash between the
// two only leads to a redelivery that records nothing.
//
// # Visibility timeout and Touch
//
// Redis counts how long each pending task has gone without being
// delivered or claimed (its idle time). [Client.Reclaim] (XAUTOCLAIM)
// takes tasks idle longer than its minIdle, the visibility timeout. An
// agent may run for longer than that: a live worker calls [Client.Touch]
// with the tasks it holds, more often than the timeout, which resets their
// idle time (XCLAIM … JUSTID to itself, inside a script that skips tasks it
// no longer holds). So only the tasks of a worker that stopped touching —
// dead, hung or cut off from Redis — are reclaimed. Heartbeats
// ([Client.Beat], [Client.Workers]) are for status displays; the
// visibility timeout alone decides reclaiming.
//
// # Keys
//
// Every key starts with [Options.Prefix] (default "ba:"). IDs appear in
// braces, as Redis hash tags: the keys of one run never collide with
// another's, whatever their IDs hold, and share a cluster slot.
//
//	tasks                  stream of tasks, fields run, index, input; group "workers"
//	runs                   sorted set of run IDs, by creation time (unix ms)
//	run:{ID}               hash: job, job_path, created, enqueued, total, done, coord_beat
//	run:{ID}:results       hash: input index → result line
//	run:{ID}:out           stream of recorded results, field index, in recording order
//	state:{jobID}          hash: input index → agent state as JSON (jobID is the run's ID)
//	worker:{ID}            string (agents held) that expires with the heartbeat's TTL
//	workers                hash: worker ID → {"held":N,"beat":unix ms}
//
// Acked tasks are deleted from the stream (XDEL), so it holds only tasks
// not yet done. [Client.DeleteRun] removes a run's keys; its tasks still in
// the stream are acked and dropped by the workers that meet them.
//
// # Security
//
// The Redis URL's password never appears in an error: URLs are written as
// [RedactURL] writes them, and error texts from the client are scrubbed of
// it. rediss:// URLs connect over TLS.
package queue
