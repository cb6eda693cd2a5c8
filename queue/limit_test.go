package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/redistest"
	"github.com/batchagent/batchagent/queue"
	"github.com/redis/go-redis/v9"
)

// newRedis starts a redis-server for t and returns a client of it, and
// the server.
func newRedis(t *testing.T) (*redis.Client, *redistest.Server) {
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
	rdb, _ := newRedis(t)
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
	rdb, _ := newRedis(t)
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
	rdb, _ := newRedis(t)
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
	rdb, _ := newRedis(t)
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
	rdb, srv := newRedis(t)
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
