// Package report draws a batch run: a self-contained HTML report of a
// finished (or stopped) run read from its checkpoint store, and a live
// page that shows the same charts while the run goes on.
//
// # Charts
//
// Every chart is plain SVG generated in Go: an agent timeline (a row per
// agent, a segment per part of each turn: queue wait, backoff, inference,
// tool wait), throughput and agents running over time, the agents
// running split by what they do (in a model call, in a tool, waiting for
// a slot, other) over time, the adaptive limit and the throttled answers
// (429s) over time, histograms of the time to first token (from the
// request's sending), of the queue wait for a slot and of the turn
// latency, failures by kind, tool counters (errors included) and cost.
// Below them, a results table: input, output, error, turns, tokens and
// cost of each result, with search, a filter by status and error kind and
// pages of 50, drawn by a small inline script; a large run's page holds
// its failures first, then an even sample of the rest ([Results] says
// which rows and why), so its size stays bounded (about 1 MB for 100,000
// inputs). The page embeds its styles and script and has no external
// reference, so it opens offline from file://. [Write] writes the page and [WriteFile]
// a report file, atomically.
//
// # Data
//
// [Data] is the picture of one job: a resumed job's runs are summed into
// one picture, and Data.Runs names each. [Load] builds it from a checkpoint
// store: the agents' final and running states, and the samples a
// [Sampler] recorded while the run went (without them, throughput is
// derived from the agents' end times and the limit is "not recorded").
// A [Sampler] reads an engine's counters once a second; [Live] serves its
// samples and results as a page updated by server-sent events. A
// [Monitor] is what a run needs of both: it binds the live view's address
// before the run ([Listen]), samples the engine while it runs, recording
// the samples where the run has a state file, serves the page, and stops
// the sampling and the server when told.
//
// # Test hooks
//
// Each chart is an element with a data-chart attribute (timeline,
// throughput, agents, limit, ttft, queue, latency, errors, tools, cost); bars carry
// data-value; counters are elements with an id (done, ok, failed, ...) and
// a data-value, among them progress and eta. The results table is
// #results; its pager #results-page carries data-page, data-pages and
// data-rows, each row data-index, data-status and data-kind, and the body
// gets data-results=ready once the table is drawn. The live view serves
// the table's rows as JSON at GET /results. Tests and scripts may rely on
// them.
package report
