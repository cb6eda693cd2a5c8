package sched

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateConfig sets request and token budgets per minute. Zero fields mean
// no limit of that kind.
type RateConfig struct {
	// RPM is requests per minute.
	RPM int
	// TPM is tokens per minute (prompt and completion, estimated before a
	// call and corrected with the usage it reports).
	TPM int
}

// Rate paces calls to stay within a hosted API's rate limits, proactively,
// so a large batch runs at the account's limit without a storm of 429s. It
// is a pair of token buckets (golang.org/x/time/rate) refilled evenly over
// the minute with a burst of a tenth of the minute's budget, so a full
// minute's budget is never spent in the first second. It is safe for
// concurrent use; the zero value is not usable, use [NewRate].
type Rate struct {
	mu  sync.Mutex // protects the limiters' settings (SetLimit/SetBurst)
	req *rate.Limiter
	tok *rate.Limiter
}

// NewRate returns a pacer for cfg. Either limit may be zero (unlimited).
func NewRate(cfg RateConfig) (*Rate, error) {
	if cfg.RPM < 0 || cfg.TPM < 0 {
		return nil, fmt.Errorf("sched: negative rate limit (rpm %d, tpm %d)", cfg.RPM, cfg.TPM)
	}
	return &Rate{req: perMinute(cfg.RPM), tok: perMinute(cfg.TPM)}, nil
}

// perMinute returns a limiter for n per minute with a burst of a tenth of
// the minute's budget (at least 1), or an unlimited one for n == 0.
func perMinute(n int) *rate.Limiter {
	if n == 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(float64(n)/60), max(1, n/10))
}

// Wait blocks until one request costing tokens may start, or ctx is done.
// A cost above the token burst waits for the whole burst.
func (r *Rate) Wait(ctx context.Context, tokens int) error {
	if err := r.req.Wait(ctx); err != nil {
		return err
	}
	if r.tok.Limit() == rate.Inf || tokens <= 0 {
		return nil
	}
	return r.tok.WaitN(ctx, min(tokens, max(r.tok.Burst(), 1)))
}

// CountsTokens reports whether a token budget is in force (configured or
// learnt), that is whether the tokens passed to [Rate.Wait] matter: callers
// can skip counting them when it is not.
func (r *Rate) CountsTokens() bool { return r.tok.Limit() != rate.Inf }

// Correct adjusts the token bucket once a call's real usage is known: it
// takes the tokens that were underestimated, or gives back the excess.
func (r *Rate) Correct(estimated, actual int) {
	if r.tok.Limit() == rate.Inf || estimated == actual {
		return
	}
	now := time.Now()
	if actual > estimated {
		// Spend the difference now; the next callers wait for it.
		r.tok.ReserveN(now, min(actual-estimated, r.tok.Burst()))
		return
	}
	r.tok.ReserveN(now, -(estimated - actual)) // a negative reservation returns tokens
}

// Learn adopts limits a backend reported (its x-ratelimit-* headers) when
// they are lower than the configured ones, or when none were configured.
// Zero arguments are ignored.
func (r *Rate) Learn(rpm, tpm int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	learn := func(l *rate.Limiter, perMin int64) {
		if perMin <= 0 || perMin > math.MaxInt32 {
			return
		}
		want := rate.Limit(float64(perMin) / 60)
		if l.Limit() == rate.Inf || want < l.Limit() {
			l.SetLimit(want)
			l.SetBurst(max(1, int(perMin/10)))
		}
	}
	learn(r.req, rpm)
	learn(r.tok, tpm)
}

// Limits returns the current per-minute limits; zero means unlimited.
func (r *Rate) Limits() RateConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c RateConfig
	if l := r.req.Limit(); l != rate.Inf {
		c.RPM = int(math.Round(float64(l) * 60))
	}
	if l := r.tok.Limit(); l != rate.Inf {
		c.TPM = int(math.Round(float64(l) * 60))
	}
	return c
}

// Sync lowers the budgets left in the buckets to what the backend
// reported remains of its own (x-ratelimit-remaining-*), so that calls
// after an answer that says the account is nearly spent wait for the
// budget to refill instead of meeting 429s: another process may share the
// account, or this one may have started with the account already spent.
// A negative argument means not reported; a bucket without a limit is
// left alone. It never raises a bucket: the backend's count lags the
// calls this process has sent since.
func (r *Rate) Sync(requests, tokens int64) {
	now := time.Now()
	sync := func(l *rate.Limiter, left int64) {
		if left < 0 || l.Limit() == rate.Inf {
			return
		}
		if over := l.TokensAt(now) - float64(left); over >= 1 {
			l.ReserveN(now, min(int(over), l.Burst()))
		}
	}
	sync(r.req, requests)
	sync(r.tok, tokens)
}

// Paced reports whether a request or token budget is in force
// (configured or learnt).
func (r *Rate) Paced() bool { return r.req.Limit() != rate.Inf || r.tok.Limit() != rate.Inf }

// SharedSyncer is a [Shared] budget that also learns from what the backend
// reported in its answers: a [Gate] with one passes every answer's
// reported limits and remaining counts to Sync as it releases the call
// (package queue's SharedRate keeps them in Redis for every process).
type SharedSyncer interface {
	Shared
	// Sync takes the per-minute limits the backend reported (zero: not
	// reported) and what it said remains of them (meaningful only with its
	// limit reported; negative: not reported). It must not block for
	// long.
	Sync(ctx context.Context, limitRequests, remainingRequests, limitTokens, remainingTokens int64)
}
