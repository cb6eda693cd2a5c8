package cli_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/cli"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunMetricsAndTraces runs a job whose model calls are held at the
// HTTP simulator, scrapes --metrics-addr while they wait, then lets them
// go: the metrics show the agents and the calls in flight, and the run's
// spans reach the OTLP collector named by OTEL_EXPORTER_OTLP_ENDPOINT.
func TestRunMetricsAndTraces(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 16) // every model call of the run
	addr, _ := startWrappedSimServer(t, simhttp.Config{Model: sim.Config{Seed: 3}, MaxSeqs: 4}, func(srv http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/chat/completions" {
				arrived <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			srv.ServeHTTP(w, r)
		})
	})
	var (
		mu     sync.Mutex // protects traces
		traces []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		traces = append(traces, r.URL.Path+" "+string(body))
	}))
	defer collector.Close()
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)

	dir, job := newJob(t, "")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n{\"id\":2}\n")
	out := filepath.Join(dir, "out.jsonl")
	var stderr lockedBuffer
	done := make(chan int, 1) // the run's exit code
	go func() {
		done <- cli.Main(t.Context(), []string{"run", job, "--inputs", in, "--out", out, "--no-state",
			"--backend", "sim+http://" + addr + "/v1", "--metrics-addr", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	for range 2 { // both agents' first model calls wait at the simulator
		select {
		case <-arrived:
		case code := <-done:
			t.Fatalf("run ended early: exit %d\n%s", code, stderr.String())
		}
	}
	m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(stderr.String())
	if m == nil {
		close(release)
		t.Fatalf("stderr does not say where the metrics are:\n%s", stderr.String())
	}
	fams := scrapeMetrics(t, m[1])
	for _, w := range []struct {
		name  string
		value float64
	}{
		{"batchagent_agents_started_total", 2},
		{"batchagent_agents_running", 2},
		{"batchagent_backend_inflight", 2},
	} {
		f := fams[w.name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Errorf("%s: %v, want one series", w.name, f)
			continue
		}
		got := f.GetMetric()[0]
		if v := got.GetCounter().GetValue() + got.GetGauge().GetValue(); v != w.value {
			t.Errorf("%s = %v mid-run, want %v", w.name, v, w.value)
		}
	}
	close(release)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end after its model calls were released")
	}
	if resp, err := http.Get(m[1]); err == nil {
		resp.Body.Close()
		t.Errorf("GET %s after the run = %s, want the metrics server stopped", m[1], resp.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(traces, "\n")
	for _, want := range []string{"/v1/traces", "run job", "turn 0", "turn 1", "model call", "tool read_file", "openinference.span.kind", "LLM", "TOOL"} {
		if !strings.Contains(all, want) {
			t.Errorf("exported traces lack %q", want)
		}
	}
	if strings.Contains(all, "Read path: doc.txt") {
		t.Error("exported traces hold the prompt without --trace-content")
	}
}

// scrapeMetrics GETs url and parses the text exposition.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

func TestRunMetricsAddrInUse(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	defer ln.Close()
	_, job := newJob(t, "")
	code, _, stderr := run(t, t.Context(), "run", job, "--no-state", "--metrics-addr", strings.TrimPrefix(ln.URL, "http://"))
	if code != 2 || !strings.Contains(stderr, "--metrics-addr") {
		t.Errorf("run with --metrics-addr in use: exit %d, stderr %q; want 2 naming the flag", code, stderr)
	}
}
