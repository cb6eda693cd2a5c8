package simhttp

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// account enforces an account's requests and tokens per minute as OpenAI
// does: each limit is a bucket that holds a minute's budget, starts full
// and refills evenly over the minute. A request takes one request and its
// tokens (prompt and completion); one that finds either bucket short is
// answered 429 with the wait until it would fit. Every answer carries the
// x-ratelimit-* headers of the buckets after it. It is safe for
// concurrent use.
type account struct {
	rpm, tpm int // zero: no limit of that kind

	mu       sync.Mutex // protects the fields below
	req, tok float64    // what is left in each bucket
	last     time.Time  // when the buckets were last refilled
}

// newAccount returns the account of cfg's RPM and TPM, or nil when it
// sets neither.
func newAccount(rpm, tpm int, now time.Time) *account {
	if rpm == 0 && tpm == 0 {
		return nil
	}
	return &account{rpm: rpm, tpm: tpm, req: float64(rpm), tok: float64(tpm), last: now}
}

// refill adds what the buckets earned since the last refill. a.mu is held.
func (a *account) refill(now time.Time) {
	dt := now.Sub(a.last).Minutes()
	if dt <= 0 {
		return
	}
	a.last = now
	a.req = math.Min(float64(a.rpm), a.req+dt*float64(a.rpm))
	a.tok = math.Min(float64(a.tpm), a.tok+dt*float64(a.tpm))
}

// take charges one request of tokens at now. It returns zero when the
// request may go, else how long until it would fit and which limit ("requests" or "tokens") it is
// over. A request larger than the token budget is charged the whole
// budget. The headers h get the buckets' state after the call.
func (a *account) take(now time.Time, tokens int, h http.Header) (wait time.Duration, over string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refill(now)
	need := float64(min(tokens, a.tpm))
	if a.rpm > 0 && a.req < 1 {
		wait, over = perMinute(1-a.req, a.rpm), "requests"
	}
	if a.tpm > 0 && a.tok < need {
		if w := perMinute(need-a.tok, a.tpm); w > wait {
			wait, over = w, "tokens"
		}
	}
	if wait == 0 {
		if a.rpm > 0 {
			a.req--
		}
		if a.tpm > 0 {
			a.tok -= need
		}
	}
	a.headers(h)
	return max(wait, 0), over
}

// perMinute is how long a bucket refilled with limit a minute takes to
// earn n.
func perMinute(n float64, limit int) time.Duration {
	return time.Duration(math.Ceil(n * float64(time.Minute) / float64(limit)))
}

// headers writes OpenAI's x-ratelimit-* headers: the limits, what is left
// (whole requests and tokens) and how long until the buckets are full
// again, as a Go duration to the millisecond ("1s", "6m0s", "20ms").
// a.mu is held.
func (a *account) headers(h http.Header) {
	set := func(kind string, limit int, left float64) {
		if limit == 0 {
			return
		}
		left = max(left, 0)
		h.Set("x-ratelimit-limit-"+kind, strconv.Itoa(limit))
		h.Set("x-ratelimit-remaining-"+kind, strconv.FormatInt(int64(left), 10))
		h.Set("x-ratelimit-reset-"+kind, perMinute(float64(limit)-left, limit).Round(time.Millisecond).String())
	}
	set("requests", a.rpm, a.req)
	set("tokens", a.tpm, a.tok)
}
