// Package telemetry gives the engine's command and gateway their
// Prometheus metrics ([Metrics]) and OpenTelemetry traces
// ([SetupTracing], [AgentTracer], [Transport]).
//
// # Metrics
//
// A [Metrics] owns its registry: HTTP requests by route ([Metrics.Handler]),
// passthrough calls ([Metrics.Call]), agents' results
// ([Metrics.Result]) and an engine's counters read at scrape time
// ([Metrics.Watch]), served by [Metrics.Exposition] on GET /metrics. Every
// name starts with batchagent_ and carries its unit (_seconds, _total).
//
// # Traces
//
// [SetupTracing] reads only the standard OTEL_* environment variables and
// is off (a no-op provider) when they name no exporter. An [AgentTracer]
// turns an agent's turns, model calls and tool calls into spans with
// OpenInference attributes, so LLM-aware trace viewers (Phoenix, Langfuse,
// …) show them as such; [Transport] carries the trace to upstream HTTP
// servers in the W3C traceparent header.
//
// # A run's telemetry
//
// [StartRun] sets both up for one job's run (`batchagent run`): it binds
// the metrics address and reads OTEL_* before the run opens anything, so a
// bad setting fails first; [Run.Serve] serves the engine's metrics and
// returns the context the run's agents are traced under; [Run.Stop] ends
// the run's span, stops the server and flushes the traces.
package telemetry
