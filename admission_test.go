package batchagent_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

// capacityModel is a hand-written llm.Model fake of a server with k slots:
// a call arriving while k are in flight is refused with a 429. It declares
// capabilities like a hosted backend, and can report a queue.
type capacityModel struct {
	k        int
	latency  time.Duration
	declared int

	mu        sync.Mutex
	inflight  int
	peak      int
	calls     int
	refused   int
	starts    []time.Time
	waiting   int // reported by QueueDepth
	firstDone time.Time
}

func (m *capacityModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.calls++
	m.starts = append(m.starts, time.Now())
	if m.k > 0 && m.inflight >= m.k {
		m.refused++
		m.mu.Unlock()
		return nil, &llm.APIError{Backend: "fake", StatusCode: 429, Err: llm.ErrRateLimited}
	}
	m.inflight++
	m.peak = max(m.peak, m.inflight)
	m.mu.Unlock()
	t := time.NewTimer(m.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	m.mu.Lock()
	m.inflight--
	if m.firstDone.IsZero() {
		m.firstDone = time.Now()
	}
	m.mu.Unlock()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "ok"}, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 10}}, nil
}

func (m *capacityModel) Capabilities() llm.Capabilities {
	return llm.Capabilities{DefaultConcurrency: m.declared, QueueProbe: true}
}

func (m *capacityModel) QueueDepth(ctx context.Context) (llm.QueueDepth, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return llm.QueueDepth{Waiting: m.waiting, Running: m.inflight}, nil
}

// TestAIMDConvergesNearCapacity runs 400 agents against a server that
// throttles above k = 8 concurrent calls: every agent succeeds, and the
// adaptive limit ends near k.
func TestAIMDConvergesNearCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &capacityModel{k: 8, latency: 100 * time.Millisecond}
		e, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 64}}, batchagent.Def{
			Model: m, Task: "{id}", MaxRetries: 50,
			Backoff: batchagent.Backoff{Base: 10 * time.Millisecond, RateLimitBase: 50 * time.Millisecond},
		}, batchagent.Slice(inputs(400)))
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", r.Index, r.Err)
			}
		}
		st := e.Stats()
		t.Logf("k=8: final limit %d, %d limit changes, %d of %d calls refused", st.Limit, len(st.LimitHistory), m.refused, m.calls)
		if st.Limit < 4 || st.Limit > 12 {
			t.Errorf("final limit = %d, want near k = 8 (history %v)", st.Limit, st.LimitHistory)
		}
		if st.Throttles == 0 || len(st.LimitHistory) < 2 {
			t.Errorf("throttles %d, history %v; want the limit to have adapted", st.Throttles, st.LimitHistory)
		}
		// After convergence few calls are refused: far fewer than the
		// agents (a fixed limit of 64 would refuse most of every wave).
		if m.refused > 100 {
			t.Errorf("%d calls refused of %d, want the limit to stop the storm", m.refused, m.calls)
		}
	})
}

func TestDeclaredConcurrencyStartsLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &capacityModel{latency: 10 * time.Millisecond, declared: 4}
		e := newEngine(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 50}})
		spec := mustSpec(t, batchagent.Def{Model: m, Task: "{id}"})
		// The backend's admission is made on its first use: a run of no
		// inputs makes it.
		if _, err := e.Run(t.Context(), spec, batchagent.Slice(nil)); err != nil {
			t.Fatal(err)
		}
		if got := e.Stats().Limit; got != 4 || m.calls != 0 {
			t.Errorf("initial limit = %d after %d calls, want the backend's default 4 before any call", got, m.calls)
		}
		if _, err := e.Run(t.Context(), spec, batchagent.Slice(inputs(200))); err != nil {
			t.Fatal(err)
		}
		if m.peak > 50 || e.Stats().Limit <= 4 {
			t.Errorf("peak %d limit %d: want growth above 4 and never above 50", m.peak, e.Stats().Limit)
		}
	})
}

func TestRPMPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &capacityModel{latency: time.Millisecond}
		start := time.Now()
		_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{RateLimit: batchagent.RateLimit{RPM: 600}}},
			batchagent.Def{Model: m, Task: "{id}"}, batchagent.Slice(inputs(160)))
		took := time.Since(start)
		if len(res) != 160 || res[159].Err != nil {
			t.Fatalf("results %d, last err %v", len(res), res[159].Err)
		}
		// A burst of 60 (a tenth of the minute), then 10 per second.
		if took < 9900*time.Millisecond || took > 10200*time.Millisecond {
			t.Errorf("160 calls at 600 rpm took %v, want about 10s", took)
		}
		if m.refused != 0 {
			t.Errorf("%d calls refused", m.refused)
		}
	})
}

func TestBackpressurePausesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &capacityModel{latency: 10 * time.Millisecond, waiting: 100}
		go func() {
			time.Sleep(time.Second)
			m.mu.Lock()
			m.waiting = 0
			m.mu.Unlock()
		}()
		m.latency = 100 * time.Millisecond
		start := time.Now()
		e, _ := runWith(t, batchagent.Config{Admission: batchagent.Admission{MaxInflight: 2}},
			batchagent.Def{Model: m, Task: "{id}"}, batchagent.Slice(inputs(20)))
		// The first probe (after 200ms) pauses; the calls already admitted
		// before it ran go through, nothing after until the queue drains.
		var during int
		for _, s := range m.starts {
			if d := s.Sub(start); d > 250*time.Millisecond && d < time.Second {
				during++
			}
		}
		if during != 0 || e.Stats().Pauses == 0 {
			t.Errorf("%d calls started while the server's queue was long, pauses %d; want 0 and ≥ 1", during, e.Stats().Pauses)
		}
	})
}

func TestWarmPrefixSendsOneFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &capacityModel{latency: 300 * time.Millisecond}
		_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{WarmPrefix: true}},
			batchagent.Def{Model: m, Task: "{id}"}, batchagent.Slice(inputs(10)))
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		first := m.starts[0]
		for _, s := range m.starts[1:] {
			if s.Before(m.firstDone) {
				t.Errorf("a call started %v after the first, before it returned (%v)", s.Sub(first), m.firstDone.Sub(first))
			}
		}
	})
}

// TestTokensCountedOnlyUnderTPM checks that requests are counted (a whole
// conversation re-read per call) only while a token budget is in force.
func TestTokensCountedOnlyUnderTPM(t *testing.T) {
	for _, tc := range []struct {
		name string
		rl   batchagent.RateLimit
		want int64
	}{
		{"no budget", batchagent.RateLimit{}, 0},
		{"rpm only", batchagent.RateLimit{RPM: 1_000_000}, 0},
		{"tpm", batchagent.RateLimit{TPM: 1_000_000_000}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var counted atomic.Int64
			tc.rl.CountTokens = func(*llm.Request) int { counted.Add(1); return 10 }
			_, res := runWith(t, batchagent.Config{Admission: batchagent.Admission{RateLimit: tc.rl}},
				batchagent.Def{Model: newSim(t, sim.Config{ToolTurns: -1}), Task: "{id}"}, batchagent.Slice(inputs(20)))
			if len(res) != 20 || res[19].Err != nil {
				t.Fatalf("Run: %d results, want 20, the last ok", len(res))
			}
			if got := counted.Load(); got != tc.want {
				t.Errorf("CountTokens called %d times, want %d", got, tc.want)
			}
		})
	}
}

// TestBackendsOverrideAdmission checks that Config.Backends sets the
// admission of the backend it names, and Config.Admission that of the
// others: the named backend runs 3 calls at once, another 1, and Stats
// reports each backend's limit in the order of first use.
func TestBackendsOverrideAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		named := &capacityModel{latency: 10 * time.Millisecond}
		other := &capacityModel{latency: 10 * time.Millisecond}
		e := newEngine(t, batchagent.Config{
			Admission: batchagent.Admission{MaxInflight: 1, FixedInflight: true},
			Backends: map[batchagent.Backend]batchagent.Admission{
				{Model: named, Name: "big"}: {MaxInflight: 3, FixedInflight: true},
			},
		})
		for _, d := range []batchagent.Def{
			{Model: named, ModelName: "big", Task: "{id}"},
			{Model: other, ModelName: "big", Task: "{id}"},
			{Model: named, ModelName: "small", Task: "{id}"}, // another model name: another backend
		} {
			res, err := e.Run(t.Context(), mustSpec(t, d), batchagent.Slice(inputs(12)))
			if err != nil || len(res) != 12 || res[11].Err != nil {
				t.Fatalf("run on %q: %d results, %v", d.ModelName, len(res), err)
			}
		}
		if named.peak != 3 || other.peak != 1 {
			t.Errorf("peak calls in flight: named backend %d, other %d; want 3 and 1", named.peak, other.peak)
		}
		var limits []int
		for _, b := range e.Stats().Backends {
			limits = append(limits, b.Limit)
		}
		if want := []int{3, 1, 1}; !slices.Equal(limits, want) {
			t.Errorf("backend limits in Stats = %v, want %v", limits, want)
		}
	})
}
