package telemetry

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
)

// latencyBuckets are the histogram buckets, in seconds, of request and call
// latencies: from a millisecond (a gateway's own overhead) to ten minutes
// (a long agent).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Metrics holds the Prometheus metrics of a gateway or a run, in a registry
// of its own (never the global one): HTTP requests, passthrough model calls,
// agents' results, and an engine's counters read at scrape time. Create it
// with [NewMetrics]; it is safe for concurrent use.
//
// The metrics, all prefixed batchagent_:
//
//   - http_requests_total{route,code,method}: HTTP requests served, by
//     route and status code.
//   - http_request_duration_seconds{route,code,method}: their latency, to
//     the end of the response body (a whole stream).
//   - http_requests_in_flight{route}: requests being served.
//   - ttft_seconds{source,name}: time to first token, from the request's
//     sending (its admission: the slot wait is not in it); source is
//     "call" (a passthrough call, name its model) or "agent" (name its
//     job: the first answered call's, as Result.Timings.TTFT).
//   - call_duration_seconds{model}: passthrough calls' whole duration.
//   - calls_total{model,result}: passthrough calls, result "ok" or "error".
//   - tokens_total{source,name,type}: tokens of passthrough calls and
//     agents, type "prompt", "completion", "cached" (the part of prompt
//     served from the backend's prefix cache) or "media" (the part of
//     prompt that is images, audio and documents; present once media
//     were sent).
//   - agent_queue_wait_seconds{job}: each agent's time waiting for a slot.
//   - agent_duration_seconds{job}: each agent's wall time.
//   - agent_results_total{job,kind}: results delivered, kind "ok" or the
//     failure's kind (backend, rate_limit, timeout, …).
//
// And, once [Metrics.Watch] names an engine, from its [batchagent.Stats]:
//
//   - backend_limit{backend}: the adaptive limit on concurrent model calls
//     (0: unlimited); backend_inflight{backend}, backend_waiting{backend}:
//     calls holding a slot and queued for one.
//   - backend_throttles_total{backend}: calls the backend rate-limited
//     (429) or refused as overloaded; backend_pauses_total{backend}: pauses
//     of admission by backpressure.
//   - tool_calls_total{tool}, tool_executions_total{tool},
//     tool_coalesced_total{tool}, tool_cache_hits_total{tool},
//     tool_errors_total{tool}: calls requested, executions (after dedup and
//     cache), calls joining an execution in flight, calls answered from the
//     cache, calls that failed.
//   - agents_started_total, agents_done_total{result} ("ok", "failed"),
//     agents_restored_total (done results read from a checkpoint),
//     agents_running (started, not done), agent_failures_total{kind},
//     results_by_tier_total{tier} (0: the spec's model, 1..: its
//     fallbacks), breaker_changes_total.
//   - model_calls_total (attempts, retries included), turns_total,
//     checkpoint_errors_total.
//   - pack_verified_total, pack_agreed_total: packed answers checked
//     against their task's answer alone (pack.verify), and those that
//     agreed.
//
// And, once [Metrics.WatchCost] names a job's cost:
//
//   - cost_dollars{job}: the cost of the job's tokens so far.
//   - cost_projected_dollars{job}: the job's projected cost, once it can
//     be projected.
//
// And, once [Metrics.WatchKeySpend] names a gateway's capped keys:
//
//   - key_spend_dollars{key}, key_spend_reserved_dollars{key},
//     key_spend_limit_dollars{key}: what each API key with a spend cap
//     has spent, holds reserved for its calls in flight, and may spend
//     (its max_cost); key is the key's name, never the key.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight *prometheus.GaugeVec

	ttft      *prometheus.HistogramVec
	callTime  *prometheus.HistogramVec
	calls     *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	queue     *prometheus.HistogramVec
	agentTime *prometheus.HistogramVec
	results   *prometheus.CounterVec
}

// NewMetrics returns Metrics in a new registry, which also holds the Go
// runtime's and the process's collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batchagent_http_requests_total", Help: "HTTP requests served, by route, status code and method.",
		}, []string{"route", "code", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batchagent_http_request_duration_seconds", Help: "Latency of HTTP requests to the end of the response, by route.",
			Buckets: latencyBuckets,
		}, []string{"route", "code", "method"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "batchagent_http_requests_in_flight", Help: "HTTP requests being served, by route.",
		}, []string{"route"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batchagent_ttft_seconds", Help: "Time to first token of passthrough calls (source call, by model) and agents (source agent, by job).",
			Buckets: latencyBuckets,
		}, []string{"source", "name"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batchagent_call_duration_seconds", Help: "Duration of passthrough model calls, by model.",
			Buckets: latencyBuckets,
		}, []string{"model"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batchagent_calls_total", Help: "Passthrough model calls, by model and result (ok, error).",
		}, []string{"model", "result"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batchagent_tokens_total", Help: "Tokens of passthrough calls and agents, by source (call, agent), name (model or job) and type (prompt, completion, cached, media).",
		}, []string{"source", "name", "type"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batchagent_agent_queue_wait_seconds", Help: "Time each agent waited for inference slots, by job.",
			Buckets: latencyBuckets,
		}, []string{"job"}),
		agentTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batchagent_agent_duration_seconds", Help: "Wall time of each agent, by job.",
			Buckets: latencyBuckets,
		}, []string{"job"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batchagent_agent_results_total", Help: "Agents' results delivered, by job and kind (ok, or the failure's kind).",
		}, []string{"job", "kind"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.inflight, m.ttft, m.callTime, m.calls, m.tokens,
		m.queue, m.agentTime, m.results,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns m's registry, for adding collectors of one's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Exposition returns the handler of GET /metrics: m's registry in the
// Prometheus text (or negotiated) format.
func (m *Metrics) Exposition() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Handler returns h counted under route: requests by status code,
// latency, requests in flight. The returned handler keeps h's
// http.Flusher (SSE streams flush through it).
func (m *Metrics) Handler(route string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route}
	h = promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), h)
	h = promhttp.InstrumentHandlerDuration(m.duration.MustCurryWith(labels), h)
	return promhttp.InstrumentHandlerInFlight(m.inflight.With(labels), h)
}

// Call records one passthrough model call to model: its time to first
// token (not recorded when zero: no token came), its whole duration, its
// tokens and whether it failed. With Result it makes Metrics a
// server.Recorder.
func (m *Metrics) Call(model string, ttft, total time.Duration, usage llm.Usage, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.calls.WithLabelValues(model, result).Inc()
	m.callTime.WithLabelValues(model).Observe(total.Seconds())
	if ttft > 0 {
		m.ttft.WithLabelValues("call", model).Observe(ttft.Seconds())
	}
	m.addTokens("call", model, usage)
}

// Result records one agent's result of job: its kind, time to first
// token (when one came), queue wait, wall time and tokens.
func (m *Metrics) Result(job string, r batchagent.Result) {
	kind := "ok"
	if r.Err != nil {
		kind = string(batchagent.KindOf(r.Err))
	}
	m.results.WithLabelValues(job, kind).Inc()
	if r.Timings.TTFT > 0 {
		m.ttft.WithLabelValues("agent", job).Observe(r.Timings.TTFT.Seconds())
	}
	m.queue.WithLabelValues(job).Observe(r.Timings.Queue.Seconds())
	m.agentTime.WithLabelValues(job).Observe(r.Timings.Total.Seconds())
	m.addTokens("agent", job, r.Usage)
}

func (m *Metrics) addTokens(source, name string, u llm.Usage) {
	m.tokens.WithLabelValues(source, name, "prompt").Add(float64(u.PromptTokens))
	m.tokens.WithLabelValues(source, name, "completion").Add(float64(u.CompletionTokens))
	m.tokens.WithLabelValues(source, name, "cached").Add(float64(u.CachedTokens))
	if u.MediaTokens > 0 { // no series for text-only jobs
		m.tokens.WithLabelValues(source, name, "media").Add(float64(u.MediaTokens))
	}
}

// ErrWatching is returned by [Metrics.Watch] when m already watches an
// engine.
var ErrWatching = errors.New("telemetry: metrics already watch an engine")

// Watch adds e's counters ([batchagent.Engine.Stats], read at each scrape)
// to m. A Metrics watches one engine: a second call returns
// [ErrWatching].
func (m *Metrics) Watch(e *batchagent.Engine) error {
	if err := m.reg.Register(&engineCollector{stats: e.Stats}); err != nil {
		if _, dup := errors.AsType[prometheus.AlreadyRegisteredError](err); dup {
			return ErrWatching
		}
		return err
	}
	return nil
}

// engineCollector reads an engine's Stats at scrape time.
type engineCollector struct {
	stats func() batchagent.Stats
}

var (
	descLimit         = desc("backend_limit", "Adaptive limit on concurrent model calls to the backend; 0 means unlimited.", "backend")
	descInflight      = desc("backend_inflight", "Model calls to the backend holding a slot.", "backend")
	descWaiting       = desc("backend_waiting", "Model calls queued for a slot of the backend.", "backend")
	descThrottles     = desc("backend_throttles_total", "Model calls the backend rate-limited (429) or refused as overloaded.", "backend")
	descPauses        = desc("backend_pauses_total", "Pauses of the backend's admission by backpressure.", "backend")
	descToolCalls     = desc("tool_calls_total", "Tool calls requested by models, by tool.", "tool")
	descToolExecuted  = desc("tool_executions_total", "Tool executions after dedup and caching, by tool.", "tool")
	descToolCoalesced = desc("tool_coalesced_total", "Tool calls that joined an execution already in flight, by tool.", "tool")
	descToolCacheHits = desc("tool_cache_hits_total", "Tool calls answered from the cache, by tool.", "tool")
	descToolErrors    = desc("tool_errors_total", "Tool calls that returned an error, by tool.", "tool")
	descStarted       = desc("agents_started_total", "Agents admitted (started, or failed at once).")
	descDone          = desc("agents_done_total", "Agents' results delivered, by result (ok, failed).", "result")
	descRestored      = desc("agents_restored_total", "Results delivered from the checkpoint: agents finished by an earlier run.")
	descRunning       = desc("agents_running", "Agents started and not done.")
	descFailures      = desc("agent_failures_total", "Failed agents, by kind.", "kind")
	descModelCalls    = desc("model_calls_total", "Model call attempts of agents, retries included.")
	descTurns         = desc("turns_total", "Completed model turns of agents.")
	descCheckpointErr = desc("checkpoint_errors_total", "Checkpoint saves that failed.")
	descTier          = desc("results_by_tier_total", "Results by the tier that answered them (0: the spec's model, 1..: its fallbacks).", "tier")
	descBreaker       = desc("breaker_changes_total", "State changes of the backends' circuit breakers.")
	descCachedCalls   = desc("cached_calls_total", "Model calls answered from the response cache instead of a backend.")
	descSavedTokens   = desc("cache_saved_tokens_total", "Tokens the response cache's answers had cost when first paid.")
	descPackVerified  = desc("pack_verified_total", "Packed answers checked against the answer their task got alone (pack.verify).")
	descPackAgreed    = desc("pack_agreed_total", "Checked packed answers that agreed with their task's answer alone.")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("batchagent_"+name, help, labels, nil)
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimit, descInflight, descWaiting, descThrottles, descPauses,
		descToolCalls, descToolExecuted, descToolCoalesced, descToolCacheHits, descToolErrors,
		descStarted, descDone, descRestored, descRunning, descFailures, descModelCalls, descTurns, descCheckpointErr,
		descTier, descBreaker, descCachedCalls, descSavedTokens, descPackVerified, descPackAgreed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	seen := map[string]int{} // backends by label: two values with one model name get "name#2"
	for _, b := range s.Backends {
		name := b.Backend.Name
		if seen[name]++; seen[name] > 1 {
			name += "#" + strconv.Itoa(seen[b.Backend.Name])
		}
		gauge(descLimit, float64(b.Limit), name)
		gauge(descInflight, float64(b.Inflight), name)
		gauge(descWaiting, float64(b.Waiting), name)
		counter(descThrottles, b.Throttles, name)
		counter(descPauses, b.Pauses, name)
	}
	// Stats.Tools may name a tool more than once (the retired specs' sums,
	// then each live spec's): one series per tool, summed.
	var order []string
	tools := map[string]*[5]int64{}
	for _, t := range s.Tools {
		sum, ok := tools[t.Name]
		if !ok {
			sum = new([5]int64)
			tools[t.Name] = sum
			order = append(order, t.Name)
		}
		sum[0] += t.Requested
		sum[1] += t.Executed
		sum[2] += t.Coalesced
		sum[3] += t.CacheHits
		sum[4] += t.Errors
	}
	for _, name := range order {
		sum := tools[name]
		counter(descToolCalls, sum[0], name)
		counter(descToolExecuted, sum[1], name)
		counter(descToolCoalesced, sum[2], name)
		counter(descToolCacheHits, sum[3], name)
		counter(descToolErrors, sum[4], name)
	}
	counter(descStarted, s.Started)
	counter(descDone, s.OK, "ok")
	counter(descDone, s.Failed, "failed")
	counter(descRestored, s.Restored)
	gauge(descRunning, float64(max(s.Started-s.Done, 0)))
	for _, k := range batchagent.Kinds {
		counter(descFailures, s.ByKind[k], string(k))
	}
	counter(descModelCalls, s.ModelCalls)
	counter(descTurns, s.Turns)
	counter(descCheckpointErr, s.CheckpointErrors)
	counter(descCachedCalls, s.CachedCalls)
	counter(descSavedTokens, s.SavedUsage.Total())
	counter(descPackVerified, s.PackVerified)
	counter(descPackAgreed, s.PackAgreed)
	tiers := slices.Sorted(maps.Keys(s.ByTier))
	for _, tier := range tiers {
		counter(descTier, s.ByTier[tier], strconv.Itoa(tier))
	}
	counter(descBreaker, s.BreakerChanges)
}

// Cost is a job's cost, in US dollars, as [Metrics.WatchCost] reads it.
type Cost struct {
	// Spent is the cost of the job's tokens so far.
	Spent float64
	// Projected is the job's projected cost when it is done; valid only
	// when Projecting.
	Projected float64
	// Projecting says whether Projected is known.
	Projecting bool
}

var (
	descCost          = desc("cost_dollars", "Cost of the job's tokens so far, in US dollars, by job.", "job")
	descCostProjected = desc("cost_projected_dollars", "Projected cost of the whole job, in US dollars, by job: the cost so far per result times the inputs.", "job")
)

// WatchCost adds job's cost to m, read from cost at each scrape:
// batchagent_cost_dollars{job}, and batchagent_cost_projected_dollars{job}
// while cost reports a projection. cost must be safe for concurrent use.
// A Metrics watches the cost of one job: a second call returns an error.
func (m *Metrics) WatchCost(job string, cost func() Cost) error {
	return m.reg.Register(&costCollector{job: job, cost: cost})
}

// costCollector reads a job's cost at scrape time.
type costCollector struct {
	job  string
	cost func() Cost
}

// Describe implements prometheus.Collector.
func (c *costCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCost
	ch <- descCostProjected
}

// Collect implements prometheus.Collector.
func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	cost := c.cost()
	ch <- prometheus.MustNewConstMetric(descCost, prometheus.GaugeValue, cost.Spent, c.job)
	if cost.Projecting {
		ch <- prometheus.MustNewConstMetric(descCostProjected, prometheus.GaugeValue, cost.Projected, c.job)
	}
}

// KeySpend is one API key's spend, as [Metrics.WatchKeySpend] reads it:
// the key's name (never the key itself) and its dollars spent, reserved
// by its calls in flight, and its limit.
type KeySpend struct {
	Name                   string
	Spent, Reserved, Limit float64
}

var (
	descKeySpend    = desc("key_spend_dollars", "Dollars spent by each API key with a spend cap, since the gateway started, by key name.", "key")
	descKeyReserved = desc("key_spend_reserved_dollars", "Dollars each API key with a spend cap holds reserved for its calls in flight, by key name.", "key")
	descKeyLimit    = desc("key_spend_limit_dollars", "Each API key's spend cap (max_cost) in dollars, by key name.", "key")
)

// WatchKeySpend adds the spend of a gateway's capped API keys to m, read
// from spend at each scrape: batchagent_key_spend_dollars{key},
// batchagent_key_spend_reserved_dollars{key} and
// batchagent_key_spend_limit_dollars{key}. spend must be safe for
// concurrent use. A second call returns an error.
func (m *Metrics) WatchKeySpend(spend func() []KeySpend) error {
	return m.reg.Register(keySpendCollector(spend))
}

// keySpendCollector reads the keys' spend at scrape time.
type keySpendCollector func() []KeySpend

// Describe implements prometheus.Collector.
func (c keySpendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descKeySpend
	ch <- descKeyReserved
	ch <- descKeyLimit
}

// Collect implements prometheus.Collector.
func (c keySpendCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range c() {
		ch <- prometheus.MustNewConstMetric(descKeySpend, prometheus.GaugeValue, k.Spent, k.Name)
		ch <- prometheus.MustNewConstMetric(descKeyReserved, prometheus.GaugeValue, k.Reserved, k.Name)
		ch <- prometheus.MustNewConstMetric(descKeyLimit, prometheus.GaugeValue, k.Limit, k.Name)
	}
}
