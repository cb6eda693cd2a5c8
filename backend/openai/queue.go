package openai

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batchagent/batchagent/llm"
)

// metricPair names the gauges of waiting and running requests.
type metricPair struct{ waiting, running string }

// queueMetrics are the gauges each server family exports. The simulator
// uses vLLM's names.
var queueMetrics = map[Flavor]metricPair{
	FlavorVLLM:     {"vllm:num_requests_waiting", "vllm:num_requests_running"},
	FlavorSim:      {"vllm:num_requests_waiting", "vllm:num_requests_running"},
	FlavorSGLang:   {"sglang:num_queue_reqs", "sglang:num_running_reqs"},
	FlavorLlamaCpp: {"llamacpp:requests_deferred", "llamacpp:requests_processing"},
}

// knownMetrics are tried in this order when the flavor does not say which
// server exports the metrics (an explicit MetricsURL on a generic server).
var knownMetrics = []metricPair{queueMetrics[FlavorVLLM], queueMetrics[FlavorSGLang], queueMetrics[FlavorLlamaCpp]}

// maxMetricsBytes caps the metrics text read.
const maxMetricsBytes = 8 << 20

// QueueDepth reads the server's Prometheus metrics and returns how many
// requests wait in its queue and how many run, each summed over the
// metric's label sets: vLLM (and the simulator) vllm:num_requests_waiting
// and vllm:num_requests_running, SGLang sglang:num_queue_reqs and
// sglang:num_running_reqs, llama.cpp llamacpp:requests_deferred and
// llamacpp:requests_processing (llama-server needs --metrics). It returns
// an error wrapping [ErrNoQueueProbe] when no metrics URL is known (see
// [Config.MetricsURL]), and a plain wrapped error when the metrics cannot
// be fetched or hold neither gauge. The API key is sent only to the
// BaseURL's own host. It is safe for concurrent use.
func (m *Model) QueueDepth(ctx context.Context) (llm.QueueDepth, error) {
	if m.metricsURL == "" {
		return llm.QueueDepth{}, fmt.Errorf("%s: queue depth: %w", m.name, ErrNoQueueProbe)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.metricsURL, nil)
	if err != nil {
		return llm.QueueDepth{}, fmt.Errorf("%s: queue depth: %w", m.name, err)
	}
	req.Header.Set("Accept", "text/plain")
	if *m.apiKey != "" && sameOrigin(req.URL, m.baseURL) {
		// llama-server guards /metrics with its API key.
		req.Header.Set("Authorization", "Bearer "+string(*m.apiKey))
	}
	resp, err := m.httpClient.Do(req)
	if err != nil {
		return llm.QueueDepth{}, fmt.Errorf("%s: queue depth: %w", m.name, llm.HideURLs(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return llm.QueueDepth{}, fmt.Errorf("%s: queue depth: GET %s: HTTP %d", m.name, llm.Origin(m.metricsURL), resp.StatusCode)
	}
	return m.parseQueueDepth(io.LimitReader(resp.Body, maxMetricsBytes))
}

func sameOrigin(a, b *url.URL) bool { return a.Scheme == b.Scheme && a.Host == b.Host }

// parseQueueDepth reads Prometheus text.
func (m *Model) parseQueueDepth(r io.Reader) (llm.QueueDepth, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return llm.QueueDepth{}, fmt.Errorf("%s: queue depth: %w", m.name, err)
	}
	pairs := m.metricNames
	if len(pairs) == 0 {
		pairs = knownMetrics
	}
	for _, p := range pairs {
		w, okW := families[p.waiting]
		r, okR := families[p.running]
		if okW || okR {
			return llm.QueueDepth{Waiting: sum(w), Running: sum(r)}, nil
		}
	}
	return llm.QueueDepth{}, fmt.Errorf("%s: queue depth: no %s or %s metric", m.name, pairs[0].waiting, pairs[0].running)
}

// sum adds a gauge (or counter, or untyped) family's values over its label
// sets, rounded; nil counts zero.
func sum(f *dto.MetricFamily) int {
	if f == nil {
		return 0
	}
	var total float64
	for _, mt := range f.GetMetric() {
		var v float64
		switch {
		case mt.GetGauge() != nil:
			v = mt.GetGauge().GetValue()
		case mt.GetUntyped() != nil:
			v = mt.GetUntyped().GetValue()
		case mt.GetCounter() != nil:
			v = mt.GetCounter().GetValue()
		}
		if !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 {
			total += v
		}
	}
	return int(math.Min(math.Round(total), math.MaxInt32))
}
