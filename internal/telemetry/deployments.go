package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
)

// DeploymentStats is one deployment of a served model, as
// [Metrics.WatchDeployments] reads it: the model name clients ask for, the
// deployment's name, its calls in flight and their limit, the calls sent
// and those that failed (connection, timeout, 5xx), and its circuit
// breaker's state ("closed", "half-open" or "open").
type DeploymentStats struct {
	Model, Deployment  string
	Inflight, Limit    int
	Requests, Failures int64
	State              string
}

// breakerStates are the states of a deployment's breaker, each a series
// of batchagent_deployment_breaker_state (1 for the current one).
var breakerStates = []string{"closed", "half-open", "open"}

var (
	descDeploymentInflight = desc("deployment_inflight", "Model calls in flight on each deployment of a served model.", "model", "deployment")
	descDeploymentLimit    = desc("deployment_inflight_limit", "Each deployment's in-flight limit now (adaptive).", "model", "deployment")
	descDeploymentRequests = desc("deployment_requests_total", "Model calls sent to each deployment.", "model", "deployment")
	descDeploymentFailures = desc("deployment_failures_total", "Model calls to each deployment that failed to connect, timed out or got a 5xx.", "model", "deployment")
	descDeploymentBreaker  = desc("deployment_breaker_state", "Each deployment's circuit breaker: 1 for its current state.", "model", "deployment", "state")
)

// WatchDeployments adds the deployments of a gateway's models to m, read
// from stats at each scrape: batchagent_deployment_inflight,
// batchagent_deployment_inflight_limit, batchagent_deployment_requests_total,
// batchagent_deployment_failures_total{model,deployment} and
// batchagent_deployment_breaker_state{model,deployment,state}. stats must
// be safe for concurrent use. A second call returns an error.
func (m *Metrics) WatchDeployments(stats func() []DeploymentStats) error {
	return m.reg.Register(deploymentCollector(stats))
}

// deploymentCollector reads the deployments at scrape time.
type deploymentCollector func() []DeploymentStats

// Describe implements prometheus.Collector.
func (c deploymentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDeploymentInflight
	ch <- descDeploymentLimit
	ch <- descDeploymentRequests
	ch <- descDeploymentFailures
	ch <- descDeploymentBreaker
}

// Collect implements prometheus.Collector.
func (c deploymentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c() {
		ch <- prometheus.MustNewConstMetric(descDeploymentInflight, prometheus.GaugeValue, float64(d.Inflight), d.Model, d.Deployment)
		ch <- prometheus.MustNewConstMetric(descDeploymentLimit, prometheus.GaugeValue, float64(d.Limit), d.Model, d.Deployment)
		ch <- prometheus.MustNewConstMetric(descDeploymentRequests, prometheus.CounterValue, float64(d.Requests), d.Model, d.Deployment)
		ch <- prometheus.MustNewConstMetric(descDeploymentFailures, prometheus.CounterValue, float64(d.Failures), d.Model, d.Deployment)
		for _, s := range breakerStates {
			v := 0.0
			if s == d.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descDeploymentBreaker, prometheus.GaugeValue, v, d.Model, d.Deployment, s)
		}
	}
}

// traceHeaders reads W3C trace context: traceparent and tracestate.
var traceHeaders propagation.TraceContext

// Extract wraps h so that a request's W3C traceparent and tracestate
// headers, when valid, become the remote parent of the spans started
// under its context: a gateway's spans then join the caller's trace. A
// request without them, or with malformed ones, is served unchanged.
func Extract(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" {
			r = r.WithContext(traceHeaders.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}
