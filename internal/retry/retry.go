// Package retry decides how long to wait before retrying a failed model
// call: exponential back-off with full jitter, honouring a wait the backend
// asked for (Retry-After).
package retry

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// Defaults of [Policy].
const (
	// DefaultBase is the first back-off ceiling for transient failures
	// (overload, server errors, timeouts). It is short: without a signal
	// that the backend is rate limiting, a quick retry costs little.
	DefaultBase = 50 * time.Millisecond
	// DefaultRateLimitBase is the first back-off ceiling after a rate limit
	// that came without a Retry-After.
	DefaultRateLimitBase = time.Second
	// DefaultMax caps every back-off.
	DefaultMax = 30 * time.Second
)

// Policy computes back-off delays. The zero value uses the defaults. It is
// safe for concurrent use.
type Policy struct {
	// Base is the back-off ceiling of the first retry of a transient
	// failure; it doubles with each attempt. Defaults to DefaultBase.
	Base time.Duration
	// RateLimitBase replaces Base after a rate-limit error without a
	// Retry-After. Defaults to DefaultRateLimitBase.
	RateLimitBase time.Duration
	// Max caps the ceiling. Defaults to DefaultMax.
	Max time.Duration
}

// Delay returns how long to wait before retry number attempt (0 for the
// first retry) after err. A wait asked for by the backend
// ([llm.RetryAfter]) is honoured, plus up to 10 % jitter so that many agents
// told the same wait don't return at the same instant; otherwise the delay
// is drawn uniformly from [0, min(Max, base×2^attempt)] (full jitter).
func (p Policy) Delay(attempt int, err error) time.Duration {
	base, maxd := p.Base, p.Max
	if base <= 0 {
		base = DefaultBase
	}
	if maxd <= 0 {
		maxd = DefaultMax
	}
	if ra := llm.RetryAfter(err); ra > 0 {
		return min(ra, maxd) + rand.N(ra/10+1)
	}
	if errors.Is(err, llm.ErrRateLimited) {
		base = p.RateLimitBase
		if base <= 0 {
			base = DefaultRateLimitBase
		}
	}
	ceiling := maxd
	if attempt < 32 && base<<attempt > 0 && base<<attempt < maxd {
		ceiling = base << attempt
	}
	return rand.N(ceiling + 1)
}

// ParseRetryAfter reads the wait a response asks for: the
// retry-after-ms header (milliseconds, as OpenAI and Anthropic send), then
// Retry-After in seconds or as an HTTP date. It returns zero when neither
// is present or valid; now is the current time, for the date form.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
