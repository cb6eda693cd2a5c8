package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// SharedRateConfig configures a [SharedRate]. RPM and TPM may not both be
// zero.
type SharedRateConfig struct {
	// RPM is requests per minute, over every process that shares the key.
	// Zero means no request limit.
	RPM int
	// TPM is tokens per minute, over every process that shares the key:
	// each request's estimate when it is admitted, corrected with its
	// usage once known. Zero means no token limit.
	TPM int
	// Burst is the most requests, and the most tokens, taken at once
	// after an idle spell, as a fraction of RPM and TPM: any window of
	// time carries at most Burst × the limit more than the rate allows
	// over it. Defaults to DefaultSharedBurst (one second's worth of a
	// minute's budget); it must be in (0, 1].
	Burst float64
	// Logger receives warnings (a correction Redis refused). Defaults to a
	// logger that discards.
	Logger *slog.Logger
}

// DefaultSharedBurst is the default of [SharedRateConfig.Burst]: a
// sixtieth of the minute's budget, so that a sliding minute never carries
// more than about 102 % of the limit.
const DefaultSharedBurst = 1.0 / 60

// sharedCorrectTimeout bounds a correction, which runs as a call is
// released.
const sharedCorrectTimeout = 2 * time.Second

// ErrSharedLimit is wrapped by the error [SharedRate.Wait] returns when
// Redis cannot be asked: the budget is then closed, not open, so that a
// Redis outage never lets every worker past the account's limit.
var ErrSharedLimit = errors.New("queue: shared rate limit unavailable")

// SharedRate is a backend's request and token budgets kept in Redis, for
// every worker that calls the backend: its Wait and Correct make it a
// sched.Shared (set it with batchagent.RateLimit.Shared), so that N worker
// processes together stay within one RPM and one TPM, not N times them.
//
// The budgets are GCRA limiters (github.com/go-redis/redis_rate, keys
// "rate:" + key + ":rpm" and ":tpm", expiring when idle): Wait polls
// Redis and sleeps for the RetryAfter it answers; within a process one
// goroutine at a time polls each key, so Redis sees about one request per
// process per admission, however many callers wait.
//
// Token estimates are corrected with [SharedRate.Correct]: the tokens used
// above the estimate are charged at once, whatever the budget holds (later
// requests wait for them), and those below it are given back, though never
// so that more than the burst fits at once.
//
// Redis failures close the budget: once the Redis client has retried a
// failing call as its options say (redis.Options.MaxRetries: 3 by
// default, over a second or two against a server that is down), Wait
// returns an error wrapping [ErrSharedLimit], and the agent's model call
// fails as on any infrastructure error. A failed correction is logged and
// dropped.
//
// A SharedRate is safe for concurrent use.
type SharedRate struct {
	rdb redis.UniversalClient
	lim *redis_rate.Limiter
	key string
	log *slog.Logger
	req bucket
	tok bucket
}

// bucket is one GCRA budget and the lock its local pollers share.
type bucket struct {
	key   string // redis_rate's key, without its "rate:" prefix
	limit redis_rate.Limit
	poll  chan struct{} // a token while a caller polls Redis; buffer 1: a lock that respects ctx
}

func (b *bucket) on() bool { return b.limit.Rate > 0 }

// NewSharedRate returns the budgets of cfg kept in Redis under key (for
// example Client.Key("rate", backend)), shared with every SharedRate of
// any process that uses the same key and limits. It fails if a limit is
// negative, both are zero, or Burst is out of range.
func NewSharedRate(rdb redis.UniversalClient, key string, cfg SharedRateConfig) (*SharedRate, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("queue: shared rate limit without a Redis client")
	case key == "":
		return nil, errors.New("queue: shared rate limit without a key")
	case cfg.RPM < 0 || cfg.TPM < 0:
		return nil, fmt.Errorf("queue: shared rate limit %s: negative limit (rpm %d, tpm %d)", key, cfg.RPM, cfg.TPM)
	case cfg.RPM == 0 && cfg.TPM == 0:
		return nil, fmt.Errorf("queue: shared rate limit %s: neither rpm nor tpm set", key)
	case cfg.Burst < 0 || cfg.Burst > 1:
		return nil, fmt.Errorf("queue: shared rate limit %s: burst %v not in (0, 1]", key, cfg.Burst)
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultSharedBurst
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	limit := func(perMin int) redis_rate.Limit {
		if perMin == 0 {
			return redis_rate.Limit{}
		}
		return redis_rate.Limit{Rate: perMin, Period: time.Minute, Burst: max(1, int(float64(perMin)*cfg.Burst))}
	}
	return &SharedRate{
		rdb: rdb,
		lim: redis_rate.NewLimiter(rdb),
		key: key,
		log: cfg.Logger,
		req: bucket{key: key + ":rpm", limit: limit(cfg.RPM), poll: make(chan struct{}, 1)},
		tok: bucket{key: key + ":tpm", limit: limit(cfg.TPM), poll: make(chan struct{}, 1)},
	}, nil
}

// Wait blocks until one request of tokens estimated tokens fits the
// shared budgets, and takes it (tokens 0: the request budget only). A
// request estimated above the token burst waits for the burst and is
// charged the rest at once. It returns ctx's error when ctx ends first,
// and an error wrapping [ErrSharedLimit] when Redis fails.
func (s *SharedRate) Wait(ctx context.Context, tokens int) error {
	if s.req.on() {
		if err := s.take(ctx, &s.req, 1); err != nil {
			return err
		}
	}
	if !s.tok.on() || tokens <= 0 {
		return nil
	}
	burst := s.tok.limit.Burst
	if err := s.take(ctx, &s.tok, min(tokens, burst)); err != nil {
		return err
	}
	if tokens > burst {
		if err := s.charge(ctx, &s.tok, tokens-burst); err != nil {
			return s.fail(ctx, err)
		}
	}
	return nil
}

// Correct charges actual − estimated tokens to the token budget: the
// excess at once, whatever the budget holds; a shortfall is given back.
// A Redis failure is logged at Warn and the correction dropped.
func (s *SharedRate) Correct(ctx context.Context, estimated, actual int) {
	if !s.tok.on() || actual == estimated {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sharedCorrectTimeout)
	defer cancel()
	if err := s.charge(ctx, &s.tok, actual-estimated); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "shared token budget not corrected",
			slog.String("key", s.key), slog.Int("tokens", actual-estimated), slog.Any("err", err))
	}
}

// take waits until n fit b's budget and takes them.
func (s *SharedRate) take(ctx context.Context, b *bucket, n int) error {
	select { // one poller per bucket in this process
	case b.poll <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.poll }()
	var timer *time.Timer
	for {
		res, err := s.lim.AllowN(ctx, b.key, b.limit, n)
		if err != nil {
			return s.fail(ctx, err)
		}
		if res.Allowed >= n {
			return nil
		}
		wait := max(res.RetryAfter, time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail returns ctx's error when ctx has ended, else err, a Redis
// failure, wrapped in ErrSharedLimit.
func (s *SharedRate) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %s: %w", ErrSharedLimit, s.key, err)
}

// charge moves b's GCRA state by n (negative: gives back) whatever it
// holds, keeping redis_rate's format: its key holds the theoretical
// arrival time in seconds since 2017-01-01, expiring when it is past.
func (s *SharedRate) charge(ctx context.Context, b *bucket, n int) error {
	interval := b.limit.Period.Seconds() / float64(b.limit.Rate)
	return chargeScript.Run(ctx, s.rdb, []string{"rate:" + b.key}, interval, n).Err()
}

// chargeScript adds ARGV[2] emission intervals of ARGV[1] seconds to the
// theoretical arrival time of redis_rate's key KEYS[1] (see its allowN),
// never setting it before now.
var chargeScript = redis.NewScript(`
local key = KEYS[1]
local interval = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)
local tat = redis.call("GET", key)
if not tat then
  tat = now
else
  tat = math.max(tonumber(tat), now)
end
local new_tat = math.max(tat + interval * cost, now)
local ttl = math.ceil(new_tat - now)
if ttl > 0 then
  redis.call("SET", key, new_tat, "EX", ttl)
else
  redis.call("DEL", key)
end
return 0
`)
