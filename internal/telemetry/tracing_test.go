package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchagent/batchagent/internal/telemetry"
)

// otelVars are the variables that can turn tracing on.
var otelVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
	"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}

// clearOTEL unsets the OTEL_* variables for the test.
func clearOTEL(t *testing.T) {
	t.Helper()
	for _, v := range otelVars {
		t.Setenv(v, "")
	}
}

func TestSetupTracingOffStartsNothing(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_SERVICE_NAME", "x") // not a switch: tracing stays off
	before := runtime.NumGoroutine()
	tp, shutdown, err := telemetry.SetupTracing(t.Context())
	if err != nil {
		t.Fatalf("SetupTracing = %v", err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Errorf("SetupTracing without OTEL_* = %T, want noop.TracerProvider", tp)
	}
	// Goroutines of earlier tests may still be ending: fewer is fine.
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d before SetupTracing, %d after: want none started", before, after)
	}
	if err := shutdown(t.Context()); err != nil {
		t.Errorf("shutdown = %v", err)
	}
}

func TestSetupTracingNone(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTEL(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tp, _, err := telemetry.SetupTracing(t.Context())
			if _, ok := tp.(noop.TracerProvider); !ok || err != nil {
				t.Errorf("SetupTracing = %T, %v; want noop.TracerProvider, nil", tp, err)
			}
		})
	}
}

func TestSetupTracingUnsupported(t *testing.T) {
	tests := []struct{ key, value string }{
		{"OTEL_TRACES_EXPORTER", "zipkin"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			clearOTEL(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(tt.key, tt.value)
			_, _, err := telemetry.SetupTracing(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("SetupTracing with %s=%s = %v, want an error naming %s", tt.key, tt.value, err, tt.key)
			}
		})
	}
}

// TestSetupTracingExports sends a span to an OTLP/HTTP collector named by
// OTEL_EXPORTER_OTLP_ENDPOINT.
func TestSetupTracingExports(t *testing.T) {
	type post struct {
		path, contentType string
		body              []byte
	}
	got := make(chan post, 4) // the exporter posts one batch here
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- post{r.URL.Path, r.Header.Get("Content-Type"), body}:
		default:
		}
	}))
	defer collector.Close()
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "batchagent-test")
	tp, shutdown, err := telemetry.SetupTracing(t.Context())
	if err != nil {
		t.Fatalf("SetupTracing = %v", err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "exported-span")
	span.End()
	if err := shutdown(t.Context()); err != nil { // flushes the batch
		t.Fatalf("shutdown = %v", err)
	}
	select {
	case p := <-got:
		if p.path != "/v1/traces" || p.contentType != "application/x-protobuf" ||
			!strings.Contains(string(p.body), "exported-span") || !strings.Contains(string(p.body), "batchagent-test") {
			t.Errorf("collector got %s %s %q, want /v1/traces, protobuf, the span and the service name", p.path, p.contentType, p.body)
		}
	default:
		t.Fatal("the collector got nothing after shutdown")
	}
}

func TestTransportPropagatesTraceparent(t *testing.T) {
	headers := make(chan string, 1) // one request at a time
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Get("traceparent")
	}))
	defer upstream.Close()
	client := &http.Client{Transport: telemetry.Transport(upstream.Client().Transport)}
	tp, _ := newProvider(t)
	get := func(ctx context.Context) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get("traceparent") != "" {
			t.Error("Transport set the header on the caller's request, want it on a clone")
		}
		return <-headers
	}
	ctx, span := tp.Tracer("test").Start(t.Context(), "model call")
	defer span.End()
	sc := span.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	if got := get(ctx); got != want {
		t.Errorf("traceparent upstream = %q, want %q", got, want)
	}
	if got := get(t.Context()); got != "" {
		t.Errorf("traceparent without a span = %q, want none", got)
	}
}
