package telemetry

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/proto"
)

// otlpEnv are the variables the OTLP client reads; each test starts from
// none of them set.
var otlpEnv = []string{"ENDPOINT", "HEADERS", "TIMEOUT", "COMPRESSION", "CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"}

func clearOTLP(t *testing.T) {
	t.Helper()
	for _, s := range otlpEnv {
		t.Setenv("OTEL_EXPORTER_OTLP_"+s, "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_"+s, "")
	}
}

// received is one request a collector got.
type received struct {
	path     string
	header   http.Header
	body     []byte // gunzipped when it came gzipped
	encoding string
}

// collector is an OTLP/HTTP collector answering each request with the
// next of statuses (200 once they are used up).
func collector(t *testing.T, statuses ...int) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
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
		mu.Lock()
		got = append(got, received{r.URL.Path, r.Header.Clone(), b, r.Header.Get("Content-Encoding")})
		n := len(got)
		mu.Unlock()
		if n <= len(statuses) && statuses[n-1] != http.StatusOK {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(statuses[n-1])
			io.WriteString(w, "try later")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// newClient returns the client the variables configure, its idle
// connections closed when the test ends.
func newClient(t *testing.T) *otlpClient {
	t.Helper()
	c, err := newOTLPClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// someSpans is one resource with one span named name.
func someSpans(name string) []*tracepb.ResourceSpans {
	return []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name",
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "svc"}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: make([]byte, 16), SpanId: make([]byte, 8), Name: name}}}},
	}}
}

// decode parses a request body as the collector's ExportTraceServiceRequest.
func decode(t *testing.T, b []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("body is not an ExportTraceServiceRequest: %v", err)
	}
	return &req
}

// TestOTLPClientRequest: the body is an ExportTraceServiceRequest the
// collector's own type decodes to the spans sent; headers from the
// variable are percent-decoded; gzip when asked; the general endpoint
// gets /v1/traces appended.
func TestOTLPClientRequest(t *testing.T) {
	srv, got := collector(t)
	clearOTLP(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL+"/base/")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20k1, x-tenant = a%2Cb")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	c := newClient(t)
	if err := c.UploadTraces(t.Context(), append(someSpans("one"), someSpans("two")...)); err != nil {
		t.Fatalf("UploadTraces = %v", err)
	}
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("collector got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.path != "/base/v1/traces" || r.encoding != "gzip" || r.header.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("request %s, encoding %q, type %q; want /base/v1/traces, gzip, application/x-protobuf", r.path, r.encoding, r.header.Get("Content-Type"))
	}
	if a, tn := r.header.Get("Authorization"), r.header.Get("X-Tenant"); a != "Bearer k1" || tn != "a,b" {
		t.Errorf("headers Authorization %q, X-Tenant %q; want \"Bearer k1\", \"a,b\"", a, tn)
	}
	req := decode(t, r.body)
	if len(req.ResourceSpans) != 2 || req.ResourceSpans[0].ScopeSpans[0].Spans[0].Name != "one" ||
		req.ResourceSpans[1].ScopeSpans[0].Spans[0].Name != "two" ||
		req.ResourceSpans[0].Resource.Attributes[0].Value.GetStringValue() != "svc" {
		t.Errorf("decoded request %v, want the two resources' spans one and two", req)
	}
}

// TestOTLPClientTracesEndpoint: the traces endpoint is used as it is.
func TestOTLPClientTracesEndpoint(t *testing.T) {
	srv, got := collector(t)
	clearOTLP(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/custom/spans")
	c := newClient(t)
	if err := c.UploadTraces(t.Context(), someSpans("s")); err != nil {
		t.Fatal(err)
	}
	if reqs := got(); len(reqs) != 1 || reqs[0].path != "/custom/spans" || reqs[0].encoding != "" {
		t.Errorf("requests %+v, want one to /custom/spans, not compressed", reqs)
	}
}

// TestOTLPClientRetries: 503 and 429 are tried again, a 400 is not, and
// the error names the status and the collector's host but not the path,
// query or user of the endpoint, which may hold a key.
func TestOTLPClientRetries(t *testing.T) {
	t.Run("then ok", func(t *testing.T) {
		srv, got := collector(t, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK)
		clearOTLP(t)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/v1/traces")
		c := newClient(t)
		if err := c.UploadTraces(t.Context(), someSpans("s")); err != nil {
			t.Fatalf("UploadTraces = %v, want success on the third try", err)
		}
		if n := len(got()); n != 3 {
			t.Errorf("collector got %d requests, want 3", n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		srv, got := collector(t, http.StatusBadRequest)
		clearOTLP(t)
		u := strings.Replace(srv.URL, "http://", "http://user:pw-secret@", 1)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", u+"/v1/traces?key=q-secret")
		c := newClient(t)
		err := c.UploadTraces(t.Context(), someSpans("s"))
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), strings.TrimPrefix(srv.URL, "http://")) {
			t.Fatalf("UploadTraces = %v, want an error naming 400 and the host", err)
		}
		for _, secret := range []string{"pw-secret", "q-secret", "/v1/traces"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q holds %q", err, secret)
			}
		}
		if n := len(got()); n != 1 {
			t.Errorf("collector got %d requests, want 1: a 400 is not tried again", n)
		}
	})
	t.Run("gives up at the timeout", func(t *testing.T) {
		always := make([]int, 100000) // 503 to every try
		for i := range always {
			always[i] = http.StatusServiceUnavailable
		}
		srv, got := collector(t, always...)
		clearOTLP(t)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "200")
		c := newClient(t)
		err := c.UploadTraces(t.Context(), someSpans("s"))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "503") {
			t.Errorf("UploadTraces = %v, want the last 503 and the deadline", err)
		}
		if n := len(got()); n < 2 {
			t.Errorf("collector got %d requests, want at least 2 within the timeout", n)
		}
	})
	t.Run("collector down", func(t *testing.T) {
		srv, _ := collector(t)
		url := srv.URL
		srv.Close()
		clearOTLP(t)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
		c := newClient(t)
		start := time.Now()
		if err := c.UploadTraces(t.Context(), someSpans("s")); err == nil {
			t.Error("UploadTraces to a closed port = nil, want an error")
		}
		// Not tried again until the 10 s timeout: a loose bound, not a timing.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("UploadTraces took %v with the collector down, want no retries", d)
		}
	})
}

// TestOTLPClientConfigErrors: a malformed variable is an error naming it
// and not quoting a value that may hold a key.
func TestOTLPClientConfigErrors(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://h/x?key=secret", "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "no-scheme-secret", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization", "OTEL_EXPORTER_OTLP_HEADERS: entry 1"},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=1,b=%zz-secret", "OTEL_EXPORTER_OTLP_TRACES_HEADERS: entry 2 (b)"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "a b=1", "OTEL_EXPORTER_OTLP_HEADERS: entry 1: \"a b\" is not a header name"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "k=secret%0Ax", "OTEL_EXPORTER_OTLP_HEADERS: entry 1 (k): the value holds"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{"OTEL_EXPORTER_OTLP_CLIENT_KEY", "/nonexistent/key.pem", "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTLP(t)
			t.Setenv(tt.name, tt.value)
			_, err := newOTLPClient()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("newOTLPClient with %s=%q = %v, want an error with %q", tt.name, tt.value, err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q quotes the value", err)
			}
		})
	}
}

// FuzzOTLPHeaders: any value of the headers variable either parses or is
// refused with an error naming the variable and never quoting a value;
// what parses has canonical names, and a pair list built from the parsed
// headers parses back to the same headers.
func FuzzOTLPHeaders(f *testing.F) {
	for _, s := range []string{"", "a=b", "authorization=Bearer%20k1, x-tenant = a%2Cb", "=v", "k", "k=%zz", "a=1,,b=2", "k=v=w", " k = v ", "k=%E2%82%AC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.IndexByte(v, 0) >= 0 {
			return // no environment variable holds a NUL
		}
		clearOTLP(t)
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", v)
		h, err := otlpHeaders()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "telemetry: OTEL_EXPORTER_OTLP_HEADERS: entry ") {
				t.Fatalf("otlpHeaders(%q) error %q, want one naming the variable and the entry", v, err)
			}
			return
		}
		var pairs []string
		for k, val := range h {
			if k != http.CanonicalHeaderKey(k) || !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(val) {
				t.Fatalf("otlpHeaders(%q) header %q: %q, want a canonical, valid header", v, k, val)
			}
			pairs = append(pairs, k+"="+url.PathEscape(val))
		}
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", strings.Join(pairs, ","))
		back, err := otlpHeaders()
		if len(pairs) == 0 {
			return // nothing to round-trip; an empty variable is no headers
		}
		if err != nil || len(back) != len(h) {
			t.Fatalf("round trip of %q: %v, %v; want %v", v, back, err, h)
		}
		for k, val := range h {
			if back[k] != val {
				t.Fatalf("round trip of %q: %s=%q, want %q", v, k, back[k], val)
			}
		}
	})
}
