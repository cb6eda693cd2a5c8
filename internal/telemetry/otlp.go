package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batchagent/batchagent/internal/retry"
)

// otlpClient sends spans to an OTLP/HTTP collector as protobuf: the
// transport under otel's otlptrace exporter, which turns spans into
// protobuf messages. It stands in for otlptracehttp, whose configuration
// package imports gRPC: gRPC brings golang.org/x/net/trace, whose debug
// pages run an html/template, and a program that can reach a template's
// execution keeps every exported method of every type it uses (the
// template calls them by name through reflection). That made the
// batchagent binary 150 MB instead of 93 MB and its resident set 12 MB
// larger before it ran anything (bench fair -n 200: 50 MB peak, 38 MB
// without). The request is the one otlptracehttp sends: POST
// application/x-protobuf of an ExportTraceServiceRequest.
type otlpClient struct {
	endpoint *url.URL // where to POST
	headers  map[string]string
	timeout  time.Duration // each export, retries included
	gzip     bool
	http     *http.Client
}

// The configuration variables of the OTLP exporter, each read first in
// its OTEL_EXPORTER_OTLP_TRACES_ form, then in its OTEL_EXPORTER_OTLP_
// form (the OpenTelemetry specification's order).
const (
	otlpDefaultEndpoint = "http://localhost:4318/v1/traces"
	otlpDefaultTimeout  = 10 * time.Second
)

// otlpBackoff is the wait between two tries of a batch the collector
// refused for now (429, 502, 503, 504) without saying how long to wait:
// jittered, doubling from 100 ms up to 5 s.
var otlpBackoff = retry.Policy{Base: 100 * time.Millisecond, RateLimitBase: 100 * time.Millisecond, Max: 5 * time.Second}

// otlpVar returns the value of the OTLP exporter's variable named by
// suffix (ENDPOINT, HEADERS, …): the traces variable when set, else the
// general one, with the name of the variable it came from.
func otlpVar(suffix string) (value, name string) {
	name = "OTEL_EXPORTER_OTLP_TRACES_" + suffix
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v, name
	}
	name = "OTEL_EXPORTER_OTLP_" + suffix
	return strings.TrimSpace(os.Getenv(name)), name
}

// newOTLPClient returns the client configured by the OTEL_EXPORTER_OTLP_*
// variables: endpoint, headers, timeout, compression and TLS (certificate,
// client certificate and key). A malformed value is an error naming its
// variable; no value is ever part of an error, since headers carry keys.
func newOTLPClient() (*otlpClient, error) {
	c := &otlpClient{timeout: otlpDefaultTimeout}
	endpoint, err := otlpEndpoint()
	if err != nil {
		return nil, err
	}
	c.endpoint = endpoint
	if c.headers, err = otlpHeaders(); err != nil {
		return nil, err
	}
	if v, name := otlpVar("TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("telemetry: %s=%q: want a positive number of milliseconds", name, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := otlpVar("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("telemetry: %s=%q: only \"gzip\" and \"none\" are supported", name, v)
	}
	tlsConfig, err := otlpTLS()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	c.http = &http.Client{Transport: tr}
	return c, nil
}

// otlpEndpoint returns the URL spans are posted to: the traces endpoint as
// it is given, or the general one with /v1/traces appended.
func otlpEndpoint() (*url.URL, error) {
	raw, name := otlpVar("ENDPOINT")
	appendPath := name == "OTEL_EXPORTER_OTLP_ENDPOINT"
	if raw == "" {
		raw, appendPath = otlpDefaultEndpoint, false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not the value: it may hold a key in its query or user.
		return nil, fmt.Errorf("telemetry: %s: want an http:// or https:// URL with a host", name)
	}
	if appendPath {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		u.RawPath = ""
	}
	return u, nil
}

// otlpHeaders parses the headers variable: name=value pairs separated by
// commas, values percent-encoded (W3C Baggage octets).
func otlpHeaders() (map[string]string, error) {
	v, name := otlpVar("HEADERS")
	h := make(map[string]string)
	if v == "" {
		return h, nil
	}
	for i, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("telemetry: %s: entry %d: want name=value", name, i+1)
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fmt.Errorf("telemetry: %s: entry %d: %q is not a header name", name, i+1, k)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s: entry %d (%s): malformed percent-encoding", name, i+1, k)
		}
		if !httpguts.ValidHeaderFieldValue(dec) {
			return nil, fmt.Errorf("telemetry: %s: entry %d (%s): the value holds characters a header cannot carry", name, i+1, k)
		}
		h[http.CanonicalHeaderKey(k)] = dec
	}
	return h, nil
}

// otlpTLS returns the TLS configuration of the certificate variables; nil
// (the system's roots) when none is set.
func otlpTLS() (*tls.Config, error) {
	ca, caName := otlpVar("CERTIFICATE")
	cert, certName := otlpVar("CLIENT_CERTIFICATE")
	key, keyName := otlpVar("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s: %w", caName, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("telemetry: %s: %s holds no PEM certificate", caName, ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("telemetry: %s and %s go together: set both or neither", certName, keyName)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s, %s: %w", certName, keyName, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

var _ otlptrace.Client = (*otlpClient)(nil)

// Start implements otlptrace.Client: there is nothing to connect.
func (c *otlpClient) Start(context.Context) error { return nil }

// Stop implements otlptrace.Client: it closes idle connections.
func (c *otlpClient) Stop(context.Context) error {
	c.http.CloseIdleConnections()
	return nil
}

// UploadTraces implements otlptrace.Client: it posts spans as one
// ExportTraceServiceRequest, trying again while the collector answers
// 429, 502, 503 or 504 (after its Retry-After, else otlpBackoff) until
// the export's timeout.
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := exportRequest(spans)
	if err != nil {
		return fmt.Errorf("telemetry: OTLP export: encode: %w", err)
	}
	if c.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(body); err != nil {
			return fmt.Errorf("telemetry: OTLP export: gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("telemetry: OTLP export: gzip: %w", err)
		}
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var last error // the refusal of the last try, when it was for now
	for attempt := 0; ; attempt++ {
		wait, err := c.post(ctx, body)
		if wait < 0 {
			if err != nil && last != nil && ctx.Err() != nil {
				// The timeout ended a try: what the collector said last
				// tells more than the timeout alone.
				return fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
			}
			return err
		}
		last = err
		if wait == 0 {
			wait = otlpBackoff.Delay(attempt, nil)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// post sends body once. It returns a negative wait when done (err nil on
// success), else how long the collector asked to wait (0: not said, as
// retry.ParseRetryAfter reads it) and the error to report if no later try
// succeeds.
func (c *otlpClient) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("telemetry: OTLP export to %s: %w", c.where(), err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL in a *url.Error may hold a key: report the host only.
		// Not tried again: with the collector down, every batch would
		// hold the exporter (and the caller's shutdown) for the timeout.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return -1, fmt.Errorf("telemetry: OTLP export to %s: %w", c.where(), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return -1, nil
	}
	err = fmt.Errorf("telemetry: OTLP export to %s: %s", c.where(), resp.Status)
	if text := strings.TrimSpace(string(msg)); text != "" && !strings.Contains(resp.Header.Get("Content-Type"), "protobuf") {
		err = fmt.Errorf("%w: %.200s", err, text)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retry.ParseRetryAfter(resp.Header, time.Now()), err
	}
	return -1, err
}

// where names the collector in errors: scheme and host, never the path,
// query or user, which may carry a key.
func (c *otlpClient) where() string {
	return c.endpoint.Scheme + "://" + c.endpoint.Host
}

// exportRequest encodes an ExportTraceServiceRequest holding spans: field
// 1 (resource_spans), one length-delimited message each. The message type
// lives in a package that also holds the gRPC service, which this client
// keeps out of the binary (see otlpClient).
func exportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range spans {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}
