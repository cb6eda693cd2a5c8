package report_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/report"
)

// TestLiveMonitorServes serves the live page on the bound address while
// sampling, records samples, and after StopSampling and Stop leaves no
// goroutine behind (TestMain's goleak).
func TestLiveMonitorServes(t *testing.T) {
	m, err := report.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if m.Serving() || m.Sampling() || m.OnResult() == nil {
		t.Fatalf("before Start: serving %v, sampling %v, OnResult nil %v; want false, false, false", m.Serving(), m.Sampling(), m.OnResult() == nil)
	}
	var persisted atomic.Int32
	persist := func(context.Context, time.Time, json.RawMessage) error { persisted.Add(1); return nil }
	cfg := report.SamplerConfig{Stats: func() batchagent.Stats { return batchagent.Stats{} }, Info: report.Info{Job: "j"}, Persist: persist}
	if err := m.Start(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if !m.Serving() || !m.Sampling() {
		t.Fatalf("after Start: serving %v, sampling %v; want both", m.Serving(), m.Sampling())
	}
	m.OnResult()(batchagent.Result{Index: 0})
	resp, err := http.Get("http://" + m.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Errorf("GET /: %d, %.200q; want the page", resp.StatusCode, body)
	}
	if err := m.StopSampling(); err != nil {
		t.Errorf("StopSampling: %v", err)
	}
	if err := m.StopSampling(); err != nil {
		t.Errorf("StopSampling again: %v", err)
	}
	if persisted.Load() == 0 {
		t.Error("no sample recorded")
	}
	if err := m.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestLiveMonitorOff does nothing without an address or a Persist, and
// samples without serving with a Persist only.
func TestLiveMonitorOff(t *testing.T) {
	m, err := report.Listen(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	stats := func() batchagent.Stats { return batchagent.Stats{} }
	if err := m.Start(t.Context(), report.SamplerConfig{Stats: stats}); err != nil {
		t.Fatal(err)
	}
	if m.Addr() != nil || m.OnResult() != nil || m.Serving() || m.Sampling() {
		t.Errorf("off: addr %v, OnResult %v, serving %v, sampling %v; want none", m.Addr(), m.OnResult() != nil, m.Serving(), m.Sampling())
	}
	persist := func(context.Context, time.Time, json.RawMessage) error { return nil }
	if err := m.Start(t.Context(), report.SamplerConfig{Stats: stats, Persist: persist}); err != nil {
		t.Fatal(err)
	}
	if m.Serving() || !m.Sampling() {
		t.Errorf("persist only: serving %v, sampling %v; want sampling only", m.Serving(), m.Sampling())
	}
	if err := m.StopSampling(); err != nil {
		t.Error(err)
	}
	if err := m.Stop(); err != nil {
		t.Error(err)
	}
}

// TestLiveMonitorBadAddr fails at Listen, before anything runs.
func TestLiveMonitorBadAddr(t *testing.T) {
	if _, err := report.Listen(t.Context(), "no-port"); err == nil {
		t.Error("Listen(no-port): want an error")
	}
}
