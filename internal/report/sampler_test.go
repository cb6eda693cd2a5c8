package report_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/llm"
)

// fakeEngine is the counters a Sampler reads: done results of 10 started.
type fakeEngine struct{ done atomic.Int64 }

func (e *fakeEngine) stats() batchagent.Stats {
	n := e.done.Load()
	return batchagent.Stats{Started: 10, Done: n, OK: n, Inflight: 3, Limit: 8, Throttles: n / 2,
		Usage: llm.Usage{PromptTokens: 100 * n}}
}

func TestSamplerSamplesEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e fakeEngine
		var (
			mu   sync.Mutex
			recs []map[string]any
		)
		persist := func(_ context.Context, at time.Time, data json.RawMessage) error {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			recs = append(recs, m)
			return nil
		}
		s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats, Inputs: 10, Persist: persist,
			Info: report.Info{Job: "j", Price: &llm.Price{Input: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- s.Run(ctx) }()
		changed := s.Changed()
		for i := range 3 {
			time.Sleep(500 * time.Millisecond) // between two samples
			e.done.Store(int64(i + 1))
			time.Sleep(500 * time.Millisecond)
		}
		select {
		case <-changed:
		default:
			t.Error("Changed's channel is still open after three samples")
		}
		time.Sleep(500 * time.Millisecond)
		select {
		case <-s.Done():
			t.Fatal("Done is closed while Run runs")
		default:
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		<-s.Done()
		got := s.Samples()
		want := []report.Sample{
			{T: 0, Active: 10, Inflight: 3, Limit: 8},
			{T: 1, Done: 1, OK: 1, Active: 9, Inflight: 3, Limit: 8, Tokens: 100, Cost: 0.0002},
			{T: 2, Done: 2, OK: 2, Active: 8, Inflight: 3, Limit: 8, Throttles: 1, Tokens: 200, Cost: 0.0004},
			{T: 3, Done: 3, OK: 3, Active: 7, Inflight: 3, Limit: 8, Throttles: 1, Tokens: 300, Cost: 0.0006},
			{T: 3.5, Done: 3, OK: 3, Active: 7, Inflight: 3, Limit: 8, Throttles: 1, Tokens: 300, Cost: 0.0006},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("samples (-want +got):\n%s", diff)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(recs) != len(want) {
			t.Fatalf("Persist recorded %d samples, want %d", len(recs), len(want))
		}
		if info, ok := recs[0]["info"].(map[string]any); !ok || info["job"] != "j" {
			t.Errorf("the first recorded sample's info = %v, want the job j", recs[0]["info"])
		}
		if _, ok := recs[1]["info"]; ok {
			t.Errorf("the second recorded sample carries info again")
		}
		if recs[4]["done"] != 3.0 {
			t.Errorf("the last recorded sample's done = %v, want 3", recs[4]["done"])
		}
		d := s.Data()
		if !d.Done || d.Totals.Done != 3 || d.Totals.Inputs != 10 || d.Totals.Running != 7 || d.Duration() != 3500*time.Millisecond {
			t.Errorf("Data() = done %v, %d done of %d, %d running, %v long; want done, 3 of 10, 7 running, 3.5s",
				d.Done, d.Totals.Done, d.Totals.Inputs, d.Totals.Running, d.Duration())
		}
	})
}

func TestSamplerThinsToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e fakeEngine
		s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats, MaxSamples: 8, Interval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- s.Run(ctx) }()
		time.Sleep(10*time.Second + 50*time.Millisecond)
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		got := s.Samples()
		if len(got) > 8 || len(got) < 4 {
			t.Fatalf("kept %d samples, want 4 to 8", len(got))
		}
		if got[0].T != 0 || got[len(got)-1].T != 10.05 {
			t.Errorf("samples span %v to %v, want 0 to 10.05 (the first and last kept)", got[0].T, got[len(got)-1].T)
		}
		for i := 1; i < len(got); i++ {
			if got[i].T <= got[i-1].T {
				t.Errorf("samples out of order: %v then %v", got[i-1].T, got[i].T)
			}
		}
	})
}

func TestSamplerReportsPersistErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e fakeEngine
		full := errors.New("disk full")
		s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats,
			Persist: func(context.Context, time.Time, json.RawMessage) error { return full }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- s.Run(ctx) }()
		time.Sleep(2500 * time.Millisecond)
		cancel()
		err = <-errc
		if !errors.Is(err, full) {
			t.Fatalf("Run = %v, want it to wrap %v", err, full)
		}
		if want := "report: recording samples: 4 failed, the first: disk full"; err.Error() != want {
			t.Errorf("Run = %q, want %q", err, want)
		}
		if n := len(s.Samples()); n != 4 {
			t.Errorf("kept %d samples, want 4: sampling goes on when recording fails", n)
		}
	})
}

func TestNewSamplerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	var e fakeEngine
	tests := []struct {
		name string
		cfg  report.SamplerConfig
		want string
	}{
		{"no stats", report.SamplerConfig{}, "report: sampler: Stats is nil"},
		{"negative interval", report.SamplerConfig{Stats: e.stats, Interval: -time.Second}, "report: sampler: Interval -1s is negative"},
		{"negative max", report.SamplerConfig{Stats: e.stats, MaxSamples: -1}, "report: sampler: MaxSamples -1 is negative"},
		{"negative agents", report.SamplerConfig{Stats: e.stats, MaxAgents: -1}, "report: sampler: MaxAgents -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := report.NewSampler(tt.cfg); err == nil || err.Error() != tt.want {
				t.Errorf("NewSampler = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSamplerBoundsAgents(t *testing.T) {
	t.Parallel()
	var e fakeEngine
	s, err := report.NewSampler(report.SamplerConfig{Stats: e.stats, MaxAgents: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		s.Result(batchagent.Result{Index: i})
	}
	d := s.Data()
	if n := len(d.Agents); n < 50 || n > 100 {
		t.Fatalf("kept %d agents of 1000, want 50 to 100", n)
	}
	for i := 1; i < len(d.Agents); i++ {
		if d.Agents[i].Index <= d.Agents[i-1].Index {
			t.Fatalf("agents out of order at %d: %d then %d", i, d.Agents[i-1].Index, d.Agents[i].Index)
		}
	}
	if d.Agents[0].Index != 0 {
		t.Errorf("first agent kept = %d, want 0", d.Agents[0].Index)
	}
}
