package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/redistest"
	"github.com/batchagent/batchagent/queue"
	"github.com/batchagent/batchagent/sched"
	"github.com/redis/go-redis/v9"
)

// limitRedis starts a redis-server for t and returns a client of it, and
// the server.
func limitRedis(t *testing.T) (*redis.Client, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	opt, err := redis.ParseURL(srv.URL)
	if err != nil {
		t.Fatalf("redis.ParseURL(%q) = %v", srv.URL, err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, srv
}

func newSharedRate(t *testing.T, rdb redis.UniversalClient, key string, cfg queue.SharedRateConfig) *queue.SharedRate {
	t.Helper()
	s, err := queue.NewSharedRate(rdb, key, cfg)
	if err != nil {
		t.Fatalf("NewSharedRate(%q, %+v) = %v", key, cfg, err)
	}
	return s
}

func TestSharedRateRejectsBadConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tt := range []struct {
		name string
		key  string
		cfg  queue.SharedRateConfig
	}{
		{"no key", "", queue.SharedRateConfig{RPM: 1}},
		{"no limit", "k", queue.SharedRateConfig{}},
		{"negative rpm", "k", queue.SharedRateConfig{RPM: -1}},
		{"negative tpm", "k", queue.SharedRateConfig{TPM: -1, RPM: 1}},
		{"burst above 1", "k", queue.SharedRateConfig{RPM: 1, Burst: 1.5}},
		{"negative burst", "k", queue.SharedRateConfig{RPM: 1, Burst: -0.1}},
	} {
		if _, err := queue.NewSharedRate(rdb, tt.key, tt.cfg); err == nil {
			t.Errorf("%s: NewSharedRate(%q, %+v) = nil error, want error", tt.name, tt.key, tt.cfg)
		}
	}
}

// TestSharedRateRPM checks that four limiters on one key, as four worker
// processes would hold, share one request budget: 100 requests at 3000
// a minute (50/s, burst 50) take at least a second, where four separate
// budgets would let them all through at once.
func TestSharedRateRPM(t *testing.T) {
	rdb, _ := limitRedis(t)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 100) // one per request at most
	for range 4 {
		s := newSharedRate(t, rdb, "ba:rate:test", queue.SharedRateConfig{RPM: 3000})
		for range 25 {
			wg.Go(func() {
				if err := s.Wait(t.Context(), 0); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Wait = %v", err)
	}
	// 50 at once, then 50 more at 50 a second.
	if got := time.Since(start); got < 950*time.Millisecond || got > 5*time.Second {
		t.Errorf("100 requests through 4 limiters sharing 3000 rpm took %v, want about 1s", got)
	}
}

// TestSharedRateCorrect checks that Correct charges tokens used above the
// estimate and gives back those below: at 60,000 tpm (1000 a second, burst
// 1000) the next 1000-token request waits 1.5s after a call that used 500
// more than estimated, and 0.5s after one that used 500 fewer.
func TestSharedRateCorrect(t *testing.T) {
	rdb, _ := limitRedis(t)
	for _, tt := range []struct {
		name   string
		actual int
		want   time.Duration
	}{
		{"above estimate", 1500, 1500 * time.Millisecond},
		{"below estimate", 500, 500 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSharedRate(t, rdb, "ba:rate:"+t.Name(), queue.SharedRateConfig{TPM: 60_000})
			if err := s.Wait(t.Context(), 1000); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			s.Correct(t.Context(), 1000, tt.actual)
			if err := s.Wait(t.Context(), 1000); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got < tt.want-100*time.Millisecond || got > tt.want+700*time.Millisecond {
				t.Errorf("after Correct(1000, %d) the next 1000 tokens waited %v, want %v", tt.actual, got, tt.want)
			}
		})
	}
}

// TestSharedRateLargeRequest checks that a request estimated above the
// burst is admitted once the burst fits and charged in full: the next
// request waits for the rest.
func TestSharedRateLargeRequest(t *testing.T) {
	rdb, _ := limitRedis(t)
	s := newSharedRate(t, rdb, "ba:rate:large", queue.SharedRateConfig{TPM: 60_000}) // 1000/s, burst 1000
	start := time.Now()
	if err := s.Wait(t.Context(), 2000); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got > 500*time.Millisecond {
		t.Errorf("a 2000-token request on an idle 1000-token burst waited %v, want no wait", got)
	}
	if err := s.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < 900*time.Millisecond || got > 2*time.Second {
		t.Errorf("the request after a 2000-token one was admitted after %v, want about 1s", got)
	}
}

// TestSharedRateCancel checks that a Wait for a budget spent for a minute
// returns promptly when its context ends.
func TestSharedRateCancel(t *testing.T) {
	rdb, _ := limitRedis(t)
	s := newSharedRate(t, rdb, "ba:rate:cancel", queue.SharedRateConfig{RPM: 1, Burst: 1})
	if err := s.Wait(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Wait(ctx, 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a spent budget = %v, want %v", err, context.DeadlineExceeded)
	}
	if got := time.Since(start); got > 2*time.Second {
		t.Errorf("Wait returned %v after its context ended at 200ms, want promptly", got)
	}
}

// TestSharedRateRedisDown checks that Wait fails, closed and soon, when
// Redis is gone, and that Correct returns.
func TestSharedRateRedisDown(t *testing.T) {
	rdb, srv := limitRedis(t)
	s := newSharedRate(t, rdb, "ba:rate:down", queue.SharedRateConfig{RPM: 600, TPM: 60_000})
	if err := s.Wait(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	start := time.Now()
	err := s.Wait(t.Context(), 10)
	if !errors.Is(err, queue.ErrSharedLimit) {
		t.Errorf("Wait with Redis down = %v, want an error wrapping ErrSharedLimit", err)
	}
	s.Correct(t.Context(), 10, 20)
	if got := time.Since(start); got > 10*time.Second {
		t.Errorf("Wait and Correct with Redis down took %v, want a few seconds at most", got)
	}
	t.Logf("with Redis down: %v after %v", err, time.Since(start))
}

// The setting of TestSharedTPMAcrossWorkers: a minute's budget is scaled
// down to a window of tpmWindow (120,000 tokens a minute is 10,000 per
// 5s), and the shared burst is the default burst's share of a minute,
// over that window.
const (
	tpmLimit  = 120_000
	tpmWindow = 5 * time.Second
	tpmBurst  = queue.DefaultSharedBurst * float64(tpmWindow) / float64(time.Minute)
)

// TestSharedTPMAcrossWorkers is the shared-limit test of issue 16: four
// workers (four engines, each with its own gate and its own client, as
// four processes would have) run agents against one simulated backend with
// a TPM limit. With the limit shared through Redis, the tokens the server
// processes in any window stay within 105 % of the limit's share of that
// window; with the same limit kept for each worker apart (a limit per
// process), they exceed it about four times over.
func TestSharedTPMAcrossWorkers(t *testing.T) {
	rdb, _ := limitRedis(t)
	budget := float64(tpmLimit) * tpmWindow.Seconds() / 60

	t.Run("shared", func(t *testing.T) {
		peak, total := runWorkers(t, 7*time.Second, func(int) batchagent.Admission {
			return batchagent.Admission{RateLimit: batchagent.RateLimit{
				Shared: func(batchagent.Backend) (sched.Shared, error) {
					return queue.NewSharedRate(rdb, "ba:rate:sim", queue.SharedRateConfig{TPM: tpmLimit, Burst: tpmBurst})
				},
			}}
		})
		t.Logf("shared limit: peak %d tokens in a %v window (%.1f %% of the %.0f allowed), %d in all",
			peak, tpmWindow, 100*float64(peak)/budget, budget, total)
		if float64(peak) > 1.05*budget {
			t.Errorf("peak %d tokens in a %v window, want at most 105 %% of %.0f", peak, tpmWindow, budget)
		}
		if float64(peak) < 0.8*budget {
			t.Errorf("peak %d tokens in a %v window, want the budget of %.0f about used: the test measures nothing", peak, tpmWindow, budget)
		}
	})
	t.Run("per worker", func(t *testing.T) {
		// The same limiter, but a budget of its own for each worker: a
		// limit set per process.
		peak, total := runWorkers(t, 5500*time.Millisecond, func(i int) batchagent.Admission {
			return batchagent.Admission{RateLimit: batchagent.RateLimit{
				Shared: func(batchagent.Backend) (sched.Shared, error) {
					return queue.NewSharedRate(rdb, fmt.Sprint("ba:rate:sim:", i), queue.SharedRateConfig{TPM: tpmLimit, Burst: tpmBurst})
				},
			}}
		})
		t.Logf("limit per worker: peak %d tokens in a %v window (%.1f %% of the %.0f allowed), %d in all",
			peak, tpmWindow, 100*float64(peak)/budget, budget, total)
		// About 4× when the machine keeps up; under load (CI runs other
		// packages beside it) it was seen at 3.1×. Twice one limit is
		// already what the shared limiter prevents.
		if float64(peak) < 2*budget {
			t.Errorf("peak %d tokens in a %v window with a limit per worker, want well above the %.0f of one limit", peak, tpmWindow, budget)
		}
	})
}

// runWorkers runs four engines, worker i with the admission adm(i), for
// d against one simulated backend, and returns the most tokens (prompt
// and generated) the server processed in any tpmWindow, and in all.
func runWorkers(t *testing.T, d time.Duration, adm func(i int) batchagent.Admission) (peak, total int64) {
	t.Helper()
	srv, err := simhttp.New(simhttp.Config{
		Model:            sim.Config{ToolTurns: -1, Seed: 1},
		MaxSeqs:          256,
		MaxQueue:         -1,
		PrefillPerToken:  time.Microsecond,
		DecodeStep:       time.Millisecond,
		DecodeStepPerSeq: 10 * time.Microsecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var bg sync.WaitGroup
	bg.Go(func() { _ = srv.Run(ctx) })
	defer func() {
		cancel()
		bg.Wait()
	}()

	// Sample the server's token counters while the workers run.
	type sample struct {
		at     time.Time
		tokens int64
	}
	var samples []sample
	read := func() {
		st := srv.Stats()
		samples = append(samples, sample{time.Now(), st.PromptTokens + st.GenerationTokens})
	}
	read()
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var workers sync.WaitGroup
	system := strings.Repeat("You answer questions about the number you are given. ", 20)
	for i := range 4 {
		cfg, err := openai.ParseURL("sim+" + hs.URL)
		if err != nil {
			t.Fatal(err)
		}
		m, err := openai.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e, err := batchagent.New(batchagent.Config{MaxActive: 32, Admission: adm(i)})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := batchagent.NewSpec(batchagent.Def{ID: fmt.Sprint("w", i), Model: m, System: system, Task: "Number {id}."})
		if err != nil {
			t.Fatal(err)
		}
		in := make([]batchagent.Input, 2000) // more than a worker runs in d
		for j := range in {
			in[j] = batchagent.Input{"id": fmt.Sprint(j)}
		}
		workers.Go(func() { _, _ = e.Run(runCtx, spec, batchagent.Slice(in)) })
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for runCtx.Err() == nil {
		select {
		case <-tick.C:
			read()
		case <-runCtx.Done():
		}
	}
	read()
	workers.Wait()

	for i, s := range samples {
		for _, u := range samples[i+1:] {
			if u.at.Sub(s.at) > tpmWindow {
				break
			}
			peak = max(peak, u.tokens-s.tokens)
		}
	}
	return peak, samples[len(samples)-1].tokens - samples[0].tokens
}

func newSharedSlots(t *testing.T, rdb redis.UniversalClient, key string, cfg queue.SharedSlotsConfig) *queue.SharedSlots {
	t.Helper()
	s, err := queue.NewSharedSlots(rdb, key, cfg)
	if err != nil {
		t.Fatalf("NewSharedSlots(%q, %+v) = %v", key, cfg, err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestSharedSlotsRejectsBadConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, cfg := range []queue.SharedSlotsConfig{
		{}, {Max: -1}, {Max: 2, Initial: 3}, {Max: 2, Initial: -1}, {Max: 2, LeaseTTL: -time.Second}, {Max: 2, Poll: -time.Second},
		{Max: 2, LeaseTTL: 10 * time.Millisecond},
	} {
		if _, err := queue.NewSharedSlots(rdb, "k", cfg); err == nil {
			t.Errorf("NewSharedSlots(%+v) = nil error, want error", cfg)
		}
	}
}

// TestSharedSlotsLimit checks that four processes' SharedSlots on one key
// keep at most the shared limit of calls in flight together, and reach it.
func TestSharedSlotsLimit(t *testing.T) {
	rdb, _ := limitRedis(t)
	var mu sync.Mutex // protects inflight and peak
	inflight, peak := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, 48) // one per caller at most
	for range 4 {
		s := newSharedSlots(t, rdb, "ba:slots:test", queue.SharedSlotsConfig{Max: 6, Poll: 5 * time.Millisecond})
		for range 12 {
			wg.Go(func() {
				lease, err := s.Acquire(t.Context())
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inflight++
				peak = max(peak, inflight)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // the call's work
				mu.Lock()
				inflight--
				mu.Unlock()
				s.Release(t.Context(), lease, false, false)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Acquire = %v", err)
	}
	if peak != 6 {
		t.Errorf("peak in flight over 4 processes sharing 6 slots = %d, want 6", peak)
	}
}

// TestSharedSlotsAIMD checks the shared limit's adaptation: a wave of
// congested calls halves it once, and a window of limit clean calls
// raises it by one.
func TestSharedSlotsAIMD(t *testing.T) {
	rdb, _ := limitRedis(t)
	a := newSharedSlots(t, rdb, "ba:slots:aimd", queue.SharedSlotsConfig{Max: 8})
	b := newSharedSlots(t, rdb, "ba:slots:aimd", queue.SharedSlotsConfig{Max: 8})
	limit := func() int {
		t.Helper()
		n, err := a.Limit(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	acquire := func(s *queue.SharedSlots) string {
		t.Helper()
		l, err := s.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	var wave []string
	for i := range 4 {
		wave = append(wave, acquire([]*queue.SharedSlots{a, b}[i%2]))
	}
	for i, l := range wave {
		[]*queue.SharedSlots{a, b}[i%2].Release(t.Context(), l, false, true)
	}
	if got := limit(); got != 4 {
		t.Fatalf("limit after a wave of 4 congested calls from 8 = %d, want 4 (halved once)", got)
	}
	for range 3 {
		b.Release(t.Context(), acquire(b), true, false)
	}
	if got := limit(); got != 4 {
		t.Errorf("limit after 3 clean calls = %d, want 4", got)
	}
	a.Release(t.Context(), acquire(a), true, false)
	if got := limit(); got != 5 {
		t.Errorf("limit after a window of 4 clean calls = %d, want 5", got)
	}
}

// TestSharedSlotsLeaseExpiry checks that the slot of a process that died
// holding it (it no longer renews its lease: Close) comes free when its
// lease expires.
func TestSharedSlotsLeaseExpiry(t *testing.T) {
	rdb, _ := limitRedis(t)
	cfg := queue.SharedSlotsConfig{Max: 1, LeaseTTL: 300 * time.Millisecond, Poll: 10 * time.Millisecond}
	dead := newSharedSlots(t, rdb, "ba:slots:expiry", cfg)
	if _, err := dead.Acquire(t.Context()); err != nil { // never released
		t.Fatal(err)
	}
	dead.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := newSharedSlots(t, rdb, "ba:slots:expiry", cfg).Acquire(ctx); err != nil {
		t.Fatalf("Acquire after the holder died = %v, want its slot once the lease expired", err)
	}
	if got := time.Since(start); got < 150*time.Millisecond {
		t.Errorf("the dead holder's slot came free after %v, want after its lease (300ms from its last renewal)", got)
	}
	if _, err := dead.Acquire(t.Context()); !errors.Is(err, queue.ErrSlotsClosed) {
		t.Errorf("Acquire after Close = %v, want ErrSlotsClosed", err)
	}
}

// TestSharedSlotsLeaseRenewed checks that a lease held by a live process
// outlives its TTL: the holder renews it for as long as its call lasts,
// so no other process takes the slot meanwhile.
func TestSharedSlotsLeaseRenewed(t *testing.T) {
	rdb, _ := limitRedis(t)
	cfg := queue.SharedSlotsConfig{Max: 1, LeaseTTL: 150 * time.Millisecond, Poll: 10 * time.Millisecond}
	holder := newSharedSlots(t, rdb, "ba:slots:renew", cfg)
	other := newSharedSlots(t, rdb, "ba:slots:renew", cfg)
	lease, err := holder.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second) // over 6 lease TTLs
	defer cancel()
	if l, err := other.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while a live holder keeps the only slot for 1s (lease TTL 150ms) = %q, %v; want to wait until ctx ends", l, err)
	}
	holder.Release(t.Context(), lease, true, false)
	ctx, cancel = context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := other.Acquire(ctx); err != nil {
		t.Errorf("Acquire after the release = %v, want the slot", err)
	}
}

// TestSharedSlotsRedisRestart checks that a Redis restart leaves the
// shared limit right within a renewal: restarted without its data, the
// leases still held are added again (no other process gets their slots);
// restarted with its data, a lease whose release failed while Redis was
// down is removed, not left until it lapses.
func TestSharedSlotsRedisRestart(t *testing.T) {
	const ttl = 3 * time.Second // renewed every second
	cfg := queue.SharedSlotsConfig{Max: 1, LeaseTTL: ttl, Poll: 10 * time.Millisecond}
	t.Run("without its data", func(t *testing.T) {
		t.Parallel()
		rdb, srv := limitRedis(t)
		holder := newSharedSlots(t, rdb, "ba:slots:restart", cfg)
		lease, err := holder.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		srv.Restart(t) // empty
		waitUntil(t, 2*time.Second, "the held lease added again after the restart", func() bool {
			_, err := rdb.ZScore(t.Context(), "ba:slots:restart:leases", lease).Result()
			return err == nil
		})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		if l, err := newSharedSlots(t, rdb, "ba:slots:restart", cfg).Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire while the only slot is held across the restart = %q, %v; want to wait", l, err)
		}
	})
	t.Run("with its data", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{AppendOnly: true})
		opt, err := redis.ParseURL(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		opt.MaxRetries = -1 // the release fails at once while Redis is down
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		holder := newSharedSlots(t, rdb, "ba:slots:restart", cfg)
		lease, err := holder.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		holder.Release(t.Context(), lease, true, false) // fails: Redis is down
		srv.Restart(t)
		back := time.Now()
		// Lapsing, it would stay in the set until an Acquire purged it.
		waitUntil(t, 2*time.Second, "the lease whose release failed removed", func() bool {
			n, err := rdb.ZCard(t.Context(), "ba:slots:restart:leases").Result()
			return err == nil && n == 0
		})
		t.Logf("lease removed %v after Redis came back (lease TTL %v)", time.Since(back).Round(time.Millisecond), ttl)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		if _, err := newSharedSlots(t, rdb, "ba:slots:restart", cfg).Acquire(ctx); err != nil {
			t.Errorf("Acquire once the failed release was made good = %v, want the slot", err)
		}
	})
}

// waitUntil polls cond every 10ms until it holds, failing t after limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSharedSlotsRedisDown checks that Acquire fails, closed, when Redis
// is gone.
func TestSharedSlotsRedisDown(t *testing.T) {
	rdb, srv := limitRedis(t)
	s := newSharedSlots(t, rdb, "ba:slots:down", queue.SharedSlotsConfig{Max: 2})
	srv.Stop()
	if _, err := s.Acquire(t.Context()); !errors.Is(err, queue.ErrSharedLimit) {
		t.Errorf("Acquire with Redis down = %v, want an error wrapping ErrSharedLimit", err)
	}
	s.Release(t.Context(), "0:x", true, false) // returns
}

// TestSharedSlotsOutageWaitedOut runs agents whose calls take shared
// slots while Redis is killed and restarted (empty) a second later: the
// agents waiting to be admitted wait Redis out, as in a backend outage,
// and every input succeeds. With an outage budget shorter than the
// outage, the calls fail once it is spent, naming the shared limit (a
// worker then hands the task back rather than record the failure).
func TestSharedSlotsOutageWaitedOut(t *testing.T) {
	tests := []struct {
		name   string
		budget time.Duration // the agents' outage budget; 0: the default
		down   time.Duration // how long Redis stays down
	}{
		{name: "restarted within the budget", down: time.Second},
		{name: "down beyond the budget", budget: 300 * time.Millisecond, down: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const n = 30
			srv := redistest.Start(t, redistest.Options{})
			opt, err := redis.ParseURL(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			// Each call fails at once while Redis is down, rather than
			// after the client's retries and dial retries (a second or
			// two): the outage budget is then spent within the outage.
			opt.MaxRetries, opt.DialerRetries = -1, 1
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { _ = rdb.Close() })
			var done atomic.Int64
			e, err := batchagent.New(batchagent.Config{
				Admission: batchagent.Admission{MaxInflight: 2,
					SharedInflight: func(batchagent.Backend) (sched.SharedSlots, error) {
						return newSharedSlots(t, rdb, "ba:slots:outage", queue.SharedSlotsConfig{Max: 2, LeaseTTL: time.Second}), nil
					}},
				OnResult: func(batchagent.Result) { done.Add(1) },
			})
			if err != nil {
				t.Fatal(err)
			}
			m, err := sim.New(sim.Config{Latency: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			spec, err := batchagent.NewSpec(batchagent.Def{ID: "outage", Model: m, Task: "Number {id}.", OutageBudget: tt.budget})
			if err != nil {
				t.Fatal(err)
			}
			in := make([]batchagent.Input, n)
			for i := range in {
				in[i] = batchagent.Input{"id": fmt.Sprint(i)}
			}
			var res []batchagent.Result
			var runErr error
			var wg sync.WaitGroup
			wg.Go(func() { res, runErr = e.Run(t.Context(), spec, batchagent.Slice(in)) })
			waitUntil(t, 10*time.Second, "4 results", func() bool { return done.Load() >= 4 })
			srv.Stop()
			time.Sleep(tt.down) // the outage
			srv.Restart(t)
			wg.Wait()
			if runErr != nil {
				t.Fatal(runErr)
			}
			failed := 0
			for _, r := range res {
				if r.Err == nil {
					continue
				}
				failed++
				if tt.budget == 0 {
					t.Errorf("input %d: %v, want success: the outage was shorter than the outage budget", r.Index, r.Err)
				} else if !errors.Is(r.Err, queue.ErrSharedLimit) {
					t.Errorf("input %d: %v, want an error wrapping ErrSharedLimit", r.Index, r.Err)
				}
			}
			if tt.budget > 0 && failed == 0 {
				t.Errorf("no input failed with Redis down %v beyond the outage budget %v", tt.down, tt.budget)
			}
			if len(res) != n {
				t.Errorf("%d results, want %d", len(res), n)
			}
		})
	}
}
