package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/batchagent/batchagent/internal/telemetry"
)

// TestWatchDeployments: each deployment of a served model is a series
// labelled model and deployment, its breaker's state a 1 among three.
func TestWatchDeployments(t *testing.T) {
	m := telemetry.NewMetrics()
	stats := []telemetry.DeploymentStats{
		{Model: "gpt", Deployment: "eu", Inflight: 3, Limit: 8, Requests: 120, Failures: 0, State: "closed"},
		{Model: "gpt", Deployment: "us", Inflight: 0, Limit: 2, Requests: 40, Failures: 7, State: "open"},
	}
	if err := m.WatchDeployments(func() []telemetry.DeploymentStats { return stats }); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchDeployments(func() []telemetry.DeploymentStats { return nil }); err == nil {
		t.Error("a second WatchDeployments = nil, want an error")
	}
	srv := httptest.NewServer(m.Exposition())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"batchagent_deployment_inflight", map[string]string{"model": "gpt", "deployment": "eu"}, 3},
		{"batchagent_deployment_inflight_limit", map[string]string{"model": "gpt", "deployment": "us"}, 2},
		{"batchagent_deployment_requests_total", map[string]string{"model": "gpt", "deployment": "eu"}, 120},
		{"batchagent_deployment_failures_total", map[string]string{"model": "gpt", "deployment": "us"}, 7},
		{"batchagent_deployment_breaker_state", map[string]string{"model": "gpt", "deployment": "us", "state": "open"}, 1},
		{"batchagent_deployment_breaker_state", map[string]string{"model": "gpt", "deployment": "us", "state": "closed"}, 0},
		{"batchagent_deployment_breaker_state", map[string]string{"model": "gpt", "deployment": "eu", "state": "closed"}, 1},
	}
	for _, tt := range tests {
		if got, ok := value(fams, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
}

// TestExtract: a valid traceparent becomes the remote parent of the
// request's context; a malformed or absent one leaves none.
func TestExtract(t *testing.T) {
	tests := []struct {
		name, traceparent string
		want              string // trace ID; "" for none
	}{
		{"valid", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"malformed", "00-zz-00f067aa0ba902b7-01", ""},
		{"absent", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got trace.SpanContext
			h := telemetry.Extract(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got = trace.SpanContextFromContext(r.Context())
			}))
			req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", nil)
			if tt.traceparent != "" {
				req.Header.Set("traceparent", tt.traceparent)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if tt.want == "" {
				if got.IsValid() {
					t.Errorf("span context %v, want none", got)
				}
				return
			}
			if got.TraceID().String() != tt.want || !got.IsRemote() {
				t.Errorf("trace %s (remote %v), want remote %s", got.TraceID(), got.IsRemote(), tt.want)
			}
		})
	}
}
