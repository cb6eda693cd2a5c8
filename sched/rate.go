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
	// OTPM is output (completion) tokens per minute, where the backend
	// limits them apart (Anthropic). A call's output is known only once it
	// is answered, so this budget is paced by debt: see [Rate.TakeOutput].
	OTPM int
}

// Rate paces calls to stay within a hosted API's rate limits, proactively,
// so a large batch runs at the account's limit without a storm of 429s. It
// is a set of token buckets (golang.org/x/time/rate) refilled evenly over
// the minute with a burst of a tenth of the minute's budget, so a full
// minute's budget is never spent in the first second: requests, tokens,
// and output tokens. It is safe for concurrent use; the zero value is not
// usable, use [NewRate].
//
// The output-token bucket is paced by debt, since a call's output is
// known only once it is answered: a call starts only while the bucket
// holds at least one token ([Rate.Wait], [Rate.TakeOutput]), takes the
// output the calls so far produced on average, and the real output
// corrects that once known ([Rate.SpendOutput]), which may leave the
// bucket in debt: the next calls wait for the refill.
type Rate struct {
	mu  sync.Mutex // protects the limiters' settings (SetLimit/SetBurst)
	req *rate.Limiter
	tok *rate.Limiter
	out *rate.Limiter

	outMu    sync.Mutex // serializes TakeOutput's check and take; protects the fields below
	outCalls int64      // answers whose output was recorded
	outSum   int64      // their output tokens
}

// NewRate returns a pacer for cfg. Any limit may be zero (unlimited).
func NewRate(cfg RateConfig) (*Rate, error) {
	if cfg.RPM < 0 || cfg.TPM < 0 || cfg.OTPM < 0 {
		return nil, fmt.Errorf("sched: negative rate limit (rpm %d, tpm %d, otpm %d)", cfg.RPM, cfg.TPM, cfg.OTPM)
	}
	return &Rate{req: perMinute(cfg.RPM), tok: perMinute(cfg.TPM), out: perMinute(cfg.OTPM)}, nil
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
// A cost above the token burst waits for the whole burst. While the
// output-token bucket is in debt it also waits for it to hold one token,
// taking none: [Rate.TakeOutput] takes the call's share.
func (r *Rate) Wait(ctx context.Context, tokens int) error {
	if err := r.req.Wait(ctx); err != nil {
		return err
	}
	if r.tok.Limit() != rate.Inf && tokens > 0 {
		if err := r.tok.WaitN(ctx, min(tokens, max(r.tok.Burst(), 1))); err != nil {
			return err
		}
	}
	return r.waitOutput(ctx)
}

// waitOutput blocks until the output-token bucket holds at least one
// token, or ctx is done. It takes none.
func (r *Rate) waitOutput(ctx context.Context) error {
	for {
		d := r.outputDelay(time.Now())
		if d == 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// outputDelay returns how long until the output-token bucket holds one
// token, from now: zero when it does, or has no limit.
func (r *Rate) outputDelay(now time.Time) time.Duration {
	lim := r.out.Limit()
	if lim == rate.Inf {
		return 0
	}
	have := r.out.TokensAt(now)
	if have >= 1 || lim <= 0 {
		return 0
	}
	return max(time.Duration((1-have)/float64(lim)*float64(time.Second)), time.Millisecond)
}

// TakeOutput waits until the output-token bucket holds at least one token
// and takes the output a call is expected to produce, the average of the
// answers recorded by [Rate.SpendOutput] so far (one token before any),
// which may leave the bucket in debt. It returns how many it took, to be
// passed to SpendOutput once the call is answered, or ctx's error having
// taken none. Without an output-token limit it takes none and returns 0 at
// once. Calls started together take their shares one after the other, so
// that a refill lets through as many calls as it pays for, not all.
func (r *Rate) TakeOutput(ctx context.Context) (int, error) {
	for {
		if r.out.Limit() == rate.Inf {
			return 0, nil
		}
		now := time.Now()
		r.outMu.Lock()
		d := r.outputDelay(now)
		if d == 0 {
			n := 1
			if r.outCalls > 0 {
				n = max(1, int(r.outSum/r.outCalls))
			}
			r.spend(r.out, now, n)
			r.outMu.Unlock()
			return n, nil
		}
		r.outMu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
}

// SpendOutput settles a call's output tokens once it is answered: taken is
// what [Rate.TakeOutput] took for it, actual what the call produced (zero:
// none, or unknown, as for a refused call). It takes the difference from
// the output-token bucket, which may go into debt by up to a minute's
// budget, or gives back the excess, and records actual for the next
// calls' expectation.
func (r *Rate) SpendOutput(taken, actual int) {
	if actual > 0 {
		r.outMu.Lock()
		r.outCalls++
		r.outSum += int64(actual)
		r.outMu.Unlock()
	}
	if r.out.Limit() == rate.Inf || taken == actual {
		return
	}
	now := time.Now()
	if actual < taken {
		r.out.ReserveN(now, -(taken - actual)) // a negative reservation returns tokens
		return
	}
	r.spend(r.out, now, actual-taken)
}

// spend takes n tokens from l at now, in reservations of at most its burst
// (a larger one would be refused), so that l may go into debt; a debt
// beyond a minute's budget is not taken.
func (r *Rate) spend(l *rate.Limiter, now time.Time, n int) {
	r.mu.Lock() // the burst and limit stay as read
	defer r.mu.Unlock()
	burst := max(l.Burst(), 1)
	n = min(n, int(float64(l.Limit())*60)+1)
	for n > 0 {
		k := min(n, burst)
		l.ReserveN(now, k)
		n -= k
	}
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

// Learn adopts limits a backend reported (its x-ratelimit-* headers:
// requests, tokens and output tokens per minute) when they are lower than
// the configured ones, or when none were configured. Zero arguments are
// ignored.
func (r *Rate) Learn(rpm, tpm, otpm int64) {
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
	learn(r.out, otpm)
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
	if l := r.out.Limit(); l != rate.Inf {
		c.OTPM = int(math.Round(float64(l) * 60))
	}
	return c
}

// Sync lowers the budgets left in the buckets to what the backend
// reported remains of its own (x-ratelimit-remaining-*: requests, tokens,
// output tokens), so that calls
// after an answer that says the account is nearly spent wait for the
// budget to refill instead of meeting 429s: another process may share the
// account, or this one may have started with the account already spent.
// A negative argument means not reported; a bucket without a limit is
// left alone. It never raises a bucket: the backend's count lags the
// calls this process has sent since.
func (r *Rate) Sync(requests, tokens, output int64) {
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
	sync(r.out, output)
}

// Paced reports whether a request, token or output-token budget is in
// force (configured or learnt).
func (r *Rate) Paced() bool {
	return r.req.Limit() != rate.Inf || r.tok.Limit() != rate.Inf || r.out.Limit() != rate.Inf
}

// PacesOutput reports whether an output-token budget is in force
// (configured or learnt).
func (r *Rate) PacesOutput() bool { return r.out.Limit() != rate.Inf }

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
