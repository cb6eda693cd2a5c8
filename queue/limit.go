package queue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/batchagent/batchagent/job"
)

// SharedRateConfig configures a [SharedRate]. RPM and TPM may not both be
// zero, unless Learn is set.
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
	// Learn makes the budgets also take the limits a backend reports in
	// its answers' headers ([SharedRate.Sync]), kept in Redis for every
	// process that shares the key: each budget is the lower of the
	// configured and the learnt limit, and one with neither admits
	// everything until a limit is learnt. With Learn, RPM and TPM may both
	// be zero.
	Learn bool
}

// learnRefresh is how often a learning SharedRate rereads the limits
// learnt by other processes: before it has any, at most once a second;
// after, every learnKnownRefresh.
const (
	learnRefresh      = time.Second
	learnKnownRefresh = 30 * time.Second
	// learntTTL is how long learnt limits stay in Redis after they were
	// last reported.
	learntTTL = time.Hour
)

// DefaultSharedBurst is the default of [SharedRateConfig.Burst]: a
// sixtieth of the minute's budget, so that a sliding minute never carries
// more than about 102 % of the limit.
const DefaultSharedBurst = 1.0 / 60

// sharedCorrectTimeout bounds a correction, which runs as a call is
// released.
const sharedCorrectTimeout = 2 * time.Second

// ErrSharedLimit is wrapped by the error [SharedRate.Wait] and
// [SharedSlots.Acquire] return when Redis cannot be asked: the limit is
// then closed, not open, so that a Redis outage never lets every worker
// past the account's limit. It is job.ErrLimitUnavailable, the sentinel
// the engine also adds to a shared limit's sched.ErrSharedUnavailable: an
// agent waits it out like a backend outage, within its outage budget,
// instead of failing the call.
var ErrSharedLimit = job.ErrLimitUnavailable

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
// returns an error wrapping [ErrSharedLimit], and the agent waits and
// tries again as in a backend outage, within its outage budget. A failed
// correction is logged and dropped.
//
// A SharedRate is safe for concurrent use.
type SharedRate struct {
	rdb   redis.UniversalClient
	lim   *redis_rate.Limiter
	key   string
	log   *slog.Logger
	burst float64
	learn bool
	req   bucket
	tok   bucket

	fetchMu sync.Mutex // held while the learnt limits are reread
	mu      sync.Mutex // protects the fields below and the buckets' limits
	fetched time.Time  // when the learnt limits were last read from Redis
	learnt  [2]int64   // the learnt rpm and tpm as last read or reported; 0: none
}

// bucket is one GCRA budget and the lock its local pollers share.
type bucket struct {
	key        string // redis_rate's key, without its "rate:" prefix
	configured int    // the configured limit per minute; 0: none
	limit      redis_rate.Limit
	poll       chan struct{} // a token while a caller polls Redis; buffer 1: a lock that respects ctx
}

// perMinuteLimit returns the GCRA limit of perMin a minute, with burst
// as a fraction of it; the zero Limit (off) for perMin 0.
func perMinuteLimit(perMin int, burst float64) redis_rate.Limit {
	if perMin <= 0 {
		return redis_rate.Limit{}
	}
	return redis_rate.Limit{Rate: perMin, Period: time.Minute, Burst: max(1, int(float64(perMin)*burst))}
}

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
	case cfg.RPM == 0 && cfg.TPM == 0 && !cfg.Learn:
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
	return &SharedRate{
		rdb:   rdb,
		lim:   redis_rate.NewLimiter(rdb),
		key:   key,
		log:   cfg.Logger,
		burst: cfg.Burst,
		learn: cfg.Learn,
		req:   bucket{key: key + ":rpm", configured: cfg.RPM, limit: perMinuteLimit(cfg.RPM, cfg.Burst), poll: make(chan struct{}, 1)},
		tok:   bucket{key: key + ":tpm", configured: cfg.TPM, limit: perMinuteLimit(cfg.TPM, cfg.Burst), poll: make(chan struct{}, 1)},
	}, nil
}

// Wait blocks until one request of tokens estimated tokens fits the
// shared budgets, and takes it (tokens 0: the request budget only). A
// request estimated above the token burst waits for the burst and is
// charged the rest at once. It returns ctx's error when ctx ends first,
// and an error wrapping [ErrSharedLimit] when Redis fails. A learning
// SharedRate with no limit configured or learnt yet admits at once.
func (s *SharedRate) Wait(ctx context.Context, tokens int) error {
	req, tok, err := s.limits(ctx)
	if err != nil {
		return err
	}
	if req.Rate > 0 {
		if err := s.take(ctx, &s.req, req, 1); err != nil {
			return err
		}
	}
	if tok.Rate <= 0 || tokens <= 0 {
		return nil
	}
	if err := s.take(ctx, &s.tok, tok, min(tokens, tok.Burst)); err != nil {
		return err
	}
	if tokens > tok.Burst {
		if err := s.charge(ctx, &s.tok, tok, tokens-tok.Burst); err != nil {
			return s.fail(ctx, err)
		}
	}
	return nil
}

// Correct charges actual − estimated tokens to the token budget: the
// excess at once, whatever the budget holds; a shortfall is given back.
// A Redis failure is logged at Warn and the correction dropped.
func (s *SharedRate) Correct(ctx context.Context, estimated, actual int) {
	s.mu.Lock()
	tok := s.tok.limit
	s.mu.Unlock()
	if tok.Rate <= 0 || actual == estimated {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sharedCorrectTimeout)
	defer cancel()
	if err := s.charge(ctx, &s.tok, tok, actual-estimated); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "shared token budget not corrected",
			slog.String("key", s.key), slog.Int("tokens", actual-estimated), slog.Any("err", err))
	}
}

// Limits returns the budgets' limits per minute now (zero: none), the
// learnt ones included as this process last read or learnt them.
func (s *SharedRate) Limits() (rpm, tpm int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.req.limit.Rate, s.tok.limit.Rate
}

// Sync learns from what a backend reported in an answer's headers: the
// account's limits per minute (zero: not reported) become the shared
// budgets' limits, in Redis for every process that shares the key (the
// lower of the configured and the reported limit), and the remaining
// counts (each meaningful only with its limit reported) lower the budgets
// to them when they hold more, so that every process waits for the
// account to refill instead of meeting 429s. It never raises a budget.
// It does nothing unless the SharedRate learns ([SharedRateConfig.Learn]);
// a Redis failure is logged at Warn and the report dropped. It makes the
// SharedRate a sched.SharedSyncer.
func (s *SharedRate) Sync(ctx context.Context, limitRequests, remainingRequests, limitTokens, remainingTokens int64) {
	if !s.learn {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sharedCorrectTimeout)
	defer cancel()
	clamp := func(n int64) int64 {
		if n <= 0 || n > math.MaxInt32 {
			return 0
		}
		return n
	}
	rpm, tpm := clamp(limitRequests), clamp(limitTokens)
	s.mu.Lock()
	changed := (rpm > 0 && rpm != s.learnt[0]) || (tpm > 0 && tpm != s.learnt[1])
	if changed {
		if rpm > 0 {
			s.learnt[0] = rpm
		}
		if tpm > 0 {
			s.learnt[1] = tpm
		}
		s.applyLocked()
	}
	learnt := s.learnt
	req, tok := s.req.limit, s.tok.limit
	s.mu.Unlock()
	if changed {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, s.learntKey(), "rpm", learnt[0], "tpm", learnt[1])
			p.Expire(ctx, s.learntKey(), learntTTL)
			return nil
		})
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "learnt rate limits not shared",
				slog.String("key", s.key), slog.Int64("rpm", learnt[0]), slog.Int64("tpm", learnt[1]), slog.Any("err", err))
		}
	}
	lower := func(b *bucket, l redis_rate.Limit, limit, left int64) {
		if limit <= 0 || l.Rate <= 0 || left < 0 || left >= int64(l.Burst) {
			return // the budget never holds more than its burst
		}
		interval := l.Period.Seconds() / float64(l.Rate)
		if err := lowerScript.Run(ctx, s.rdb, []string{"rate:" + b.key}, interval, l.Burst, left).Err(); err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "shared budget not lowered to what the backend reported remains",
				slog.String("key", b.key), slog.Int64("remaining", left), slog.Any("err", err))
		}
	}
	lower(&s.req, req, limitRequests, remainingRequests)
	lower(&s.tok, tok, limitTokens, remainingTokens)
}

func (s *SharedRate) learntKey() string { return "rate:" + s.key + ":learnt" }

// applyLocked sets the buckets' limits to the lower of the configured and
// the learnt ones. s.mu is held.
func (s *SharedRate) applyLocked() {
	pick := func(configured int, learnt int64) int {
		switch {
		case learnt <= 0:
			return configured
		case configured <= 0:
			return int(learnt)
		}
		return min(configured, int(learnt))
	}
	s.req.limit = perMinuteLimit(pick(s.req.configured, s.learnt[0]), s.burst)
	s.tok.limit = perMinuteLimit(pick(s.tok.configured, s.learnt[1]), s.burst)
}

// limits returns the buckets' limits, first rereading the learnt ones
// from Redis when they are due (a learning SharedRate only).
func (s *SharedRate) limits(ctx context.Context) (req, tok redis_rate.Limit, err error) {
	if s.learn {
		// Callers wait for a reread in flight: none is admitted on the
		// limits it is replacing.
		s.fetchMu.Lock()
		defer s.fetchMu.Unlock()
	}
	s.mu.Lock()
	due := s.learn && time.Since(s.fetched) >= learnRefresh &&
		(s.learnt == [2]int64{} || time.Since(s.fetched) >= learnKnownRefresh)
	if due {
		s.fetched = time.Now() // one reread a period; a failure retries then
	}
	s.mu.Unlock()
	if due {
		vals, err := s.rdb.HMGet(ctx, s.learntKey(), "rpm", "tpm").Result()
		if err != nil {
			return req, tok, s.fail(ctx, err)
		}
		var got [2]int64
		for i, v := range vals {
			if str, ok := v.(string); ok {
				if n, err := strconv.ParseInt(str, 10, 64); err == nil && n > 0 && n <= math.MaxInt32 {
					got[i] = n
				}
			}
		}
		s.mu.Lock()
		for i := range got {
			if got[i] > 0 {
				s.learnt[i] = got[i]
			}
		}
		s.applyLocked()
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.req.limit, s.tok.limit, nil
}

// take waits until n fit b's budget of limit l and takes them.
func (s *SharedRate) take(ctx context.Context, b *bucket, l redis_rate.Limit, n int) error {
	select { // one poller per bucket in this process
	case b.poll <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.poll }()
	var timer *time.Timer
	for {
		res, err := s.lim.AllowN(ctx, b.key, l, n)
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

// charge moves b's GCRA state of limit l by n (negative: gives back)
// whatever it holds, keeping redis_rate's format: its key holds the
// theoretical arrival time in seconds since 2017-01-01, expiring when it
// is past.
func (s *SharedRate) charge(ctx context.Context, b *bucket, l redis_rate.Limit, n int) error {
	interval := l.Period.Seconds() / float64(l.Rate)
	return chargeScript.Run(ctx, s.rdb, []string{"rate:" + b.key}, interval, n).Err()
}

// lowerScript lowers what redis_rate's key KEYS[1] (emission interval
// ARGV[1] seconds, burst ARGV[2]) lets through at once to ARGV[3]: it
// moves the theoretical arrival time to now + (burst − ARGV[3]) ×
// interval when it is before that, never back.
var lowerScript = redis.NewScript(`
local key = KEYS[1]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local left = tonumber(ARGV[3])
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)
local tat = tonumber(redis.call("GET", key) or "0")
local want = now + (burst - left) * interval
if want <= tat or want <= now then
  return 0
end
redis.call("SET", key, want, "EX", math.ceil(want - now))
return 1
`)

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

// Defaults of [SharedSlotsConfig].
const (
	// DefaultLeaseTTL is the default of [SharedSlotsConfig.LeaseTTL]: the
	// slots of a process that died come free within 10 s.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultSlotPoll is the default of [SharedSlotsConfig.Poll].
	DefaultSlotPoll = 20 * time.Millisecond
)

// SharedSlotsConfig configures a [SharedSlots].
type SharedSlotsConfig struct {
	// Max is the most calls in flight over every process that shares the
	// key; the adaptive limit stays within [1, Max]. It must be positive.
	Max int
	// Initial is the limit the first process to use the key starts it
	// from. Defaults to Max.
	Initial int
	// LeaseTTL is how long a slot stays taken after its holder last
	// renewed its lease: the holding process renews its leases every third
	// of it while their calls are in flight, however long they last, so
	// the slots of a process that died, or that lost Redis, come free
	// within LeaseTTL. At least 30ms. Defaults to DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Poll is how often a process whose callers wait for a slot asks
	// Redis again (with jitter). Defaults to DefaultSlotPoll.
	Poll time.Duration
	// Logger receives warnings (a release Redis refused). Defaults to a
	// logger that discards.
	Logger *slog.Logger
}

// SharedSlots is a backend's concurrency limit kept in Redis for every
// worker that calls the backend: its Acquire and Release make it a
// sched.SharedSlots (set it with batchagent.Admission.SharedInflight), so
// that N worker processes together keep at most the limit in flight.
//
// The slots are leases in a sorted set (key + ":leases", scored by their
// expiry), and the limit adapts in a hash (key + ":limit") as one AIMD over
// every worker, applied atomically by Lua: a congested call halves it,
// once per wave (calls admitted before the last decrease do not decrease
// it again), and each window of limit clean calls raises it by one, up to
// Max. While every slot is taken, one goroutine per process asks Redis
// again every Poll.
//
// A lease lives no longer than its holder. While any is held, one
// goroutine per SharedSlots renews all of them every third of LeaseTTL,
// in one script call: the slots of a process that was killed come free
// within LeaseTTL of its last renewal. A renewal re-adds a lease Redis no
// longer holds (a Redis restarted without its data), so the count stays
// right; and it removes again the leases whose release Redis refused (a
// Redis restarting with its data), so their slots come back within a
// third of LeaseTTL of Redis answering again, not LeaseTTL later. The
// goroutine returns once nothing is held, and [SharedSlots.Close] stops it.
//
// Redis failures close the limit: Acquire returns an error wrapping
// [ErrSharedLimit], which agents wait out like a backend outage.
//
// A SharedSlots is safe for concurrent use.
type SharedSlots struct {
	rdb           redis.UniversalClient
	key           string
	leases, state string
	cfg           SharedSlotsConfig
	poll          chan struct{} // a token while a caller polls Redis; buffer 1: a lock that respects ctx

	mu sync.Mutex // protects the fields below
	// held are the leases taken here and not yet released: the renewer
	// keeps them alive.
	held map[string]struct{}
	// dropped are leases released here that Redis may still hold (their
	// release failed, or a renewal re-added them as they were released),
	// each with when it lapses anyway: the renewer removes them.
	dropped map[string]time.Time
	// renewing is closed when the renewer returns; nil while none runs.
	renewing chan struct{}
	stop     chan struct{} // closed by Close: the renewer returns
	closed   bool
	failing  bool // the last renewal failed: logged once per failing spell
}

// minLeaseTTL is the shortest [SharedSlotsConfig.LeaseTTL]: a renewal
// every third of it must be able to reach Redis in time.
const minLeaseTTL = 30 * time.Millisecond

// NewSharedSlots returns the shared concurrency limit of cfg kept in Redis
// under key (for example Client.Key("slots", backend)). It fails if Max is
// not positive or Initial, LeaseTTL or Poll is out of range.
func NewSharedSlots(rdb redis.UniversalClient, key string, cfg SharedSlotsConfig) (*SharedSlots, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("queue: shared slots without a Redis client")
	case key == "":
		return nil, errors.New("queue: shared slots without a key")
	case cfg.Max <= 0:
		return nil, fmt.Errorf("queue: shared slots %s: max %d, want at least 1", key, cfg.Max)
	case cfg.Initial < 0 || cfg.Initial > cfg.Max:
		return nil, fmt.Errorf("queue: shared slots %s: initial %d not in [1, max %d]", key, cfg.Initial, cfg.Max)
	case cfg.LeaseTTL < 0 || (cfg.LeaseTTL > 0 && cfg.LeaseTTL < minLeaseTTL) || cfg.Poll < 0:
		return nil, fmt.Errorf("queue: shared slots %s: bad lease ttl %v or poll %v", key, cfg.LeaseTTL, cfg.Poll)
	}
	if cfg.Initial == 0 {
		cfg.Initial = cfg.Max
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultSlotPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &SharedSlots{rdb: rdb, key: key, leases: key + ":leases", state: key + ":limit", cfg: cfg,
		poll: make(chan struct{}, 1), held: map[string]struct{}{}, dropped: map[string]time.Time{},
		stop: make(chan struct{})}, nil
}

// ErrSlotsClosed is returned by [SharedSlots.Acquire] after
// [SharedSlots.Close].
var ErrSlotsClosed = errors.New("queue: shared slots closed")

// Acquire blocks until a slot is free under the shared limit and takes
// it, returning its lease, which this SharedSlots renews until it is
// released. It returns ctx's error when ctx ends first, an error wrapping
// [ErrSharedLimit] when Redis fails, and [ErrSlotsClosed] after Close.
func (s *SharedSlots) Acquire(ctx context.Context) (string, error) {
	select { // one poller per process
	case s.poll <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-s.poll }()
	var timer *time.Timer
	for {
		select {
		case <-s.stop:
			return "", ErrSlotsClosed
		default:
		}
		id := rand.Text()
		v, err := slotAcquire.Run(ctx, s.rdb, []string{s.leases, s.state},
			id, s.cfg.LeaseTTL.Milliseconds(), s.cfg.Initial, s.cfg.Max).Text()
		if err != nil {
			return "", s.fail(ctx, err)
		}
		if v != "" {
			if !s.hold(v) {
				s.Release(context.WithoutCancel(ctx), v, false, false)
				return "", ErrSlotsClosed
			}
			return v, nil
		}
		// Every slot is taken: ask again after Poll, ±50 %.
		wait := s.cfg.Poll/2 + mrand.N(s.cfg.Poll+1)
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Release gives lease back and adapts the limit: congested halves it
// (once for the calls admitted before the last decrease), clean counts
// toward its next increase. A lease that expired meanwhile teaches
// nothing. The lease is no longer renewed. A Redis failure is logged at
// Warn; the lease is then removed by the next renewal that reaches Redis,
// or lapses within LeaseTTL.
func (s *SharedSlots) Release(ctx context.Context, lease string, clean, congested bool) {
	s.mu.Lock()
	delete(s.held, lease)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, sharedCorrectTimeout)
	defer cancel()
	flag := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	err := slotRelease.Run(ctx, s.rdb, []string{s.leases, s.state}, lease, flag(clean), flag(congested), s.cfg.Max).Err()
	if err != nil {
		s.mu.Lock()
		s.dropLocked(lease, time.Now())
		s.mu.Unlock()
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "shared slot not released: the next renewal removes it, or it lapses",
			slog.String("key", s.key), slog.Duration("lease_ttl", s.cfg.LeaseTTL), slog.Any("err", err))
	}
}

// Close stops renewing the leases held (they lapse within LeaseTTL) and
// waits for the renewer to return; Acquire then fails with
// [ErrSlotsClosed]. Release still works. Close is idempotent.
func (s *SharedSlots) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	done := s.renewing
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// hold records lease as held here, and starts the renewer if none runs.
// It reports false, recording nothing, after Close.
func (s *SharedSlots) hold(lease string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.held[lease] = struct{}{}
	s.startRenewerLocked()
	return true
}

// dropLocked records lease, released, for removal by the renewer; it
// lapses by itself at the latest a LeaseTTL after now.
func (s *SharedSlots) dropLocked(lease string, now time.Time) {
	if s.closed {
		return // it lapses
	}
	s.dropped[lease] = now.Add(s.cfg.LeaseTTL)
	s.startRenewerLocked()
}

func (s *SharedSlots) startRenewerLocked() {
	if s.renewing != nil {
		return
	}
	done := make(chan struct{})
	s.renewing = done
	go s.renew(done)
}

// renew renews the leases held every third of LeaseTTL, and removes those
// dropped, until nothing is left to do or Close; it closes done as it
// returns.
func (s *SharedSlots) renew(done chan struct{}) {
	defer close(done)
	every := s.cfg.LeaseTTL / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		s.mu.Lock()
		maps.DeleteFunc(s.dropped, func(_ string, lapse time.Time) bool { return now.After(lapse) })
		if len(s.held) == 0 && len(s.dropped) == 0 {
			s.renewing = nil
			s.mu.Unlock()
			return
		}
		keep := slices.Collect(maps.Keys(s.held))
		drop := slices.Collect(maps.Keys(s.dropped))
		s.mu.Unlock()

		args := make([]any, 0, 2+len(keep)+len(drop))
		args = append(args, s.cfg.LeaseTTL.Milliseconds(), len(keep))
		for _, l := range keep {
			args = append(args, l)
		}
		for _, l := range drop {
			args = append(args, l)
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := slotRenew.Run(ctx, s.rdb, []string{s.leases}, args...).Err()
		cancel()

		s.mu.Lock()
		if err == nil {
			for _, l := range drop {
				delete(s.dropped, l)
			}
			// Released while the renewal ran: it re-added them.
			for _, l := range keep {
				if _, ok := s.held[l]; !ok {
					s.dropLocked(l, time.Now())
				}
			}
		}
		wasFailing := s.failing
		s.failing = err != nil
		s.mu.Unlock()
		switch {
		case err != nil && !wasFailing:
			s.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "shared slot leases not renewed: retried every third of the lease TTL",
				slog.String("key", s.key), slog.Int("leases", len(keep)), slog.Duration("lease_ttl", s.cfg.LeaseTTL), slog.Any("err", err))
		case err == nil && wasFailing:
			s.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "shared slot leases renewed again",
				slog.String("key", s.key), slog.Int("leases", len(keep)))
		}
	}
}

// Limit returns the shared limit now; Initial before any process took a
// slot.
func (s *SharedSlots) Limit(ctx context.Context) (int, error) {
	n, err := s.rdb.HGet(ctx, s.state, "limit").Int()
	switch {
	case errors.Is(err, redis.Nil):
		return s.cfg.Initial, nil
	case err != nil:
		return 0, s.fail(ctx, err)
	}
	return n, nil
}

func (s *SharedSlots) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %s: %w", ErrSharedLimit, s.key, err)
}

// slotAcquire drops expired leases from KEYS[1] and, when fewer than the
// limit in KEYS[2] (created at ARGV[3], capped at ARGV[4]) remain, adds the
// lease "epoch:ARGV[1]" expiring in ARGV[2] ms and returns it; else "".
// KEYS[1] itself expires once its last lease has: leases of processes
// that died are not left behind after every other process is done.
var slotAcquire = redis.NewScript(`
local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local limit = tonumber(redis.call("HGET", KEYS[2], "limit"))
if not limit then
  limit = tonumber(ARGV[3])
  redis.call("HSET", KEYS[2], "limit", limit, "clean", 0, "epoch", 0)
end
limit = math.min(limit, tonumber(ARGV[4]))
if redis.call("ZCARD", KEYS[1]) >= limit then
  return ""
end
local epoch = redis.call("HGET", KEYS[2], "epoch") or "0"
local lease = epoch .. ":" .. ARGV[1]
redis.call("ZADD", KEYS[1], now + tonumber(ARGV[2]), lease)
if redis.call("PTTL", KEYS[1]) < tonumber(ARGV[2]) then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return lease
`)

// slotRenew sets the expiry of the leases ARGV[3] .. ARGV[2+ARGV[2]] of
// KEYS[1] to ARGV[1] ms from now, adding those that are missing (Redis
// lost them), and removes the leases after them; KEYS[1] expires no
// sooner than the leases renewed.
var slotRenew = redis.NewScript(`
local t = redis.call("TIME")
local expiry = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[1])
local n = tonumber(ARGV[2])
for i = 3, 2 + n do
  redis.call("ZADD", KEYS[1], expiry, ARGV[i])
end
for i = 3 + n, #ARGV do
  redis.call("ZREM", KEYS[1], ARGV[i])
end
if n > 0 and redis.call("PTTL", KEYS[1]) < tonumber(ARGV[1]) then
  redis.call("PEXPIRE", KEYS[1], ARGV[1])
end
return 0
`)

// slotRelease drops expired leases from KEYS[1], removes lease ARGV[1]
// and, if it was there,
// adapts the limit in KEYS[2]: congested (ARGV[3] = 1) halves it, unless
// the lease is of an epoch before the current one, and starts a new
// epoch; clean (ARGV[2] = 1) counts, and a window of limit clean calls
// raises it by one, up to ARGV[4]. It returns the limit.
var slotRelease = redis.NewScript(`
local t = redis.call("TIME")
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", t[1] * 1000 + math.floor(t[2] / 1000))
if redis.call("ZREM", KEYS[1], ARGV[1]) == 0 then
  return -1
end
local limit = tonumber(redis.call("HGET", KEYS[2], "limit") or ARGV[4])
local epoch = tonumber(redis.call("HGET", KEYS[2], "epoch") or "0")
local leaseEpoch = tonumber(string.match(ARGV[1], "^(%d+):"))
if ARGV[3] == "1" then
  if leaseEpoch == epoch then
    limit = math.max(1, math.floor(limit / 2))
    redis.call("HSET", KEYS[2], "limit", limit, "clean", 0, "epoch", epoch + 1)
  end
elseif ARGV[2] == "1" then
  local clean = redis.call("HINCRBY", KEYS[2], "clean", 1)
  if clean >= limit then
    limit = math.min(limit + 1, tonumber(ARGV[4]))
    redis.call("HSET", KEYS[2], "limit", limit, "clean", 0)
  end
end
return limit
`)
