package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of the traces' resource unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const ServiceName = "batchagent"

// SetupTracing returns the tracer provider configured by the standard
// OTEL_* environment variables, and the function that flushes and stops it.
//
// Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER is set (to
// something else than "none"), and OTEL_SDK_DISABLED is not "true": spans
// then go in batches to the OTLP/HTTP exporter, which reads its endpoint,
// headers, timeout, compression and TLS from the same variables
// (OTEL_EXPORTER_OTLP_TRACES_* before OTEL_EXPORTER_OTLP_*; a malformed
// one is an error naming it). Otherwise
// tracing is off: the provider is a no-op, and nothing is started (no
// exporter, no goroutine). Only the "otlp" exporter and the "http/protobuf"
// protocol are supported; others are an error naming the variable.
//
// The caller owns the provider: it must call shutdown (with a context
// bounding the final flush) once its spans have ended. SetupTracing sets no
// global (otel.SetTracerProvider is the caller's choice).
func SetupTracing(ctx context.Context) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	on, err := tracingEnabled()
	if err != nil || !on {
		return noop.NewTracerProvider(), off, err
	}
	client, err := newOTLPClient()
	if err != nil {
		return noop.NewTracerProvider(), off, err
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return noop.NewTracerProvider(), off, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: after the default, so they win
	)
	if err != nil {
		_ = exp.Shutdown(ctx) // the resource's error is the one to report
		return noop.NewTracerProvider(), off, fmt.Errorf("telemetry: trace resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return sdk, sdk.Shutdown, nil
}

// tracingEnabled reads the OTEL_* variables that turn tracing on or off.
func tracingEnabled() (bool, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
	case "none":
		return false, nil
	case "otlp":
		on = true
	default:
		return false, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: only \"otlp\" and \"none\" are supported", exp)
	}
	if !on {
		return false, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if proto == "" {
		proto, name = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	if proto != "" && proto != "http/protobuf" {
		return false, fmt.Errorf("telemetry: %s=%q: only \"http/protobuf\" is supported", name, proto)
	}
	return true, nil
}

// Transport returns rt sending the W3C trace context (traceparent,
// tracestate) of each request's context to the upstream server, so its
// spans join the caller's trace. Requests whose context has no span go
// out unchanged. A nil rt means http.DefaultTransport. The request is
// cloned before its headers are set, as http.RoundTripper requires.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{next: rt}
}

type transport struct {
	next http.RoundTripper
}

var traceContext propagation.TraceContext

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("telemetry: nil request")
	}
	if trace.SpanContextFromContext(req.Context()).IsValid() {
		req = req.Clone(req.Context())
		traceContext.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
	return t.next.RoundTrip(req)
}
