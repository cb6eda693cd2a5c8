package config_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/batchagent/batchagent/internal/config"
)

// otlpCollector is an OTLP/HTTP collector that keeps the spans it gets.
func otlpCollector(t *testing.T) (url string, spans func() []*tracepb.Span) {
	t.Helper()
	var mu sync.Mutex
	var got []*tracepb.Span
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gzip: %v", err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("body is not an ExportTraceServiceRequest: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				got = append(got, ss.Spans...)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []*tracepb.Span {
		mu.Lock()
		defer mu.Unlock()
		return append([]*tracepb.Span(nil), got...)
	}
}

// TestServeJoinsCallersTrace: a request with a W3C traceparent gets a
// span exported by serve in the caller's trace, under the caller's span;
// with trace_content set it records the prompt and the answer. A request
// without one starts a trace of its own.
func TestServeJoinsCallersTrace(t *testing.T) {
	for _, content := range []bool{false, true} {
		name := map[bool]string{false: "content off", true: "trace_content"}[content]
		t.Run(name, func(t *testing.T) {
			url, spans := otlpCollector(t)
			t.Setenv("OTEL_SDK_DISABLED", "")
			t.Setenv("OTEL_TRACES_EXPORTER", "")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url+"/v1/traces")
			yaml := "backends:\n  sim:\n    url: sim://?seed=3\n"
			if content {
				yaml += "trace_content: true\n"
			}
			sc, err := config.ParseServe([]byte(yaml), "serve.yaml", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if sc.TraceContent != content {
				t.Fatalf("TraceContent = %v, want %v", sc.TraceContent, content)
			}
			g, err := sc.Open(t.Context(), nil, nil, func(string) string { return "" })
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			hs := httptest.NewServer(g.Server)
			const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			for _, tp := range []string{"00-" + traceID + "-" + parentID + "-01", ""} {
				req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/chat/completions",
					strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"Say hello."}]}`))
				req.Header.Set("Content-Type", "application/json")
				if tp != "" {
					req.Header.Set("traceparent", tp)
					req.Header.Set("tracestate", "vendor=x")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
			}
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := g.Server.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			g.Close() // flushes the spans to the collector

			var joined, own *tracepb.Span
			for _, s := range spans() {
				if s.Name != "chat sim" {
					continue
				}
				if hex.EncodeToString(s.TraceId) == traceID {
					joined = s
				} else {
					own = s
				}
			}
			if joined == nil {
				t.Fatalf("no span %q in the caller's trace %s among %d exported", "chat sim", traceID, len(spans()))
			}
			if got := hex.EncodeToString(joined.ParentSpanId); got != parentID {
				t.Errorf("parent span = %s, want the caller's %s", got, parentID)
			}
			if joined.TraceState != "vendor=x" {
				t.Errorf("trace state = %q, want the caller's %q", joined.TraceState, "vendor=x")
			}
			if own == nil || len(own.ParentSpanId) != 0 {
				t.Errorf("the request without traceparent: span %v, want a root span of a trace of its own", own)
			}
			var input, output string
			for _, kv := range joined.Attributes {
				switch kv.Key {
				case "input.value":
					input = kv.Value.GetStringValue()
				case "output.value":
					output = kv.Value.GetStringValue()
				}
			}
			if content && (input != "Say hello." || output == "") {
				t.Errorf("trace_content: input.value %q, output.value %q, want the prompt and the answer", input, output)
			}
			if !content && (input != "" || output != "") {
				t.Errorf("content off: input.value %q, output.value %q, want none", input, output)
			}
		})
	}
}
