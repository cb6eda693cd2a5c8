package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/batchagent/batchagent/internal/spend"
)

// Key is an API key clients present as "Authorization: Bearer KEY". The
// key itself is never held: only its SHA-256.
type Key struct {
	// Name names the key in logs and metrics. Defaults to "key-N", N its
	// position in Config.Keys from 0.
	Name string
	// SHA256 is the hex SHA-256 of the key (see [HashKey]). Required.
	SHA256 string
	// MaxConcurrent caps the key's requests in progress; beyond it a
	// request is answered 429 with Retry-After: 1. Defaults to 0:
	// unlimited.
	MaxConcurrent int
	// RPM caps the key's requests per minute (a token bucket of RPM
	// tokens refilled evenly); beyond it a request is answered 429 with
	// the wait in Retry-After. Defaults to 0: unlimited.
	RPM int
	// MaxCost caps, in dollars, what the key's model calls may cost, as a
	// job's limits.max_cost caps a run: each call reserves its worst case
	// (the prompt's estimated tokens at the input price plus max_tokens at
	// the output price) and is counted at its answer's usage; once the
	// spent plus the calls in flight would pass it, the key's requests
	// (chat completions, new batches, batch lines) are answered 429 with
	// the code budget_exceeded. An agent's calls are counted as it ends:
	// agents in flight can pass the cap by their cost. Prices come from
	// Config.Prices, else the built-in table; a request for a model of no
	// known price is refused. The spend is counted per process, from 0
	// at start. Defaults to 0: no cap.
	MaxCost float64
}

// HashKey returns the hex SHA-256 of key, as [Key.SHA256] holds it.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// client is a configured key and its limits' state.
//
// A key owns the files and batches it creates by its hash (owner), not by
// its name: names may change or be given by position.
type client struct {
	name     string
	sum      [sha256.Size]byte
	max      int64
	inflight atomic.Int64
	rpm      *rate.Limiter // nil: unlimited
	cap      *spend.Cap    // nil: no spend cap
}

// owner returns the stable identity of the objects c creates: its key's
// SHA-256, in hex; "" without keys.
func (c *client) owner() string {
	if c == nil {
		return ""
	}
	return hex.EncodeToString(c.sum[:])
}

func newClients(keys []Key) ([]*client, error) {
	cs := make([]*client, len(keys))
	for i, k := range keys {
		sum, err := hex.DecodeString(k.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("key %d (%s): SHA256 must be 64 hex digits", i, k.Name)
		}
		if k.MaxConcurrent < 0 || k.RPM < 0 {
			return nil, fmt.Errorf("key %d (%s): negative limit (max concurrent %d, rpm %d)", i, k.Name, k.MaxConcurrent, k.RPM)
		}
		c := &client{name: k.Name, max: int64(k.MaxConcurrent)}
		if c.name == "" {
			c.name = fmt.Sprintf("key-%d", i)
		}
		if k.MaxCost != 0 {
			if c.cap, err = spend.New(k.MaxCost); err != nil {
				return nil, fmt.Errorf("key %d (%s): max_cost: %w", i, c.name, err)
			}
		}
		copy(c.sum[:], sum)
		for j, o := range cs[:i] {
			if o.name == c.name {
				return nil, fmt.Errorf("keys %d and %d are both named %q: names tell keys apart in logs and metrics", j, i, c.name)
			}
			if o.sum == c.sum {
				return nil, fmt.Errorf("keys %d and %d are the same key", j, i)
			}
		}
		if k.RPM > 0 {
			c.rpm = rate.NewLimiter(rate.Every(time.Minute/time.Duration(k.RPM)), k.RPM)
		}
		cs[i] = c
	}
	return cs, nil
}

// authenticate returns the client whose key r presents, comparing the
// presented key's hash with every configured one in constant time. With
// no keys configured every request is anonymous and allowed (nil, true).
func (s *Server) authenticate(r *http.Request) (*client, bool) {
	if len(s.clients) == 0 {
		return nil, true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
	var found *client
	for _, c := range s.clients {
		if subtle.ConstantTimeCompare(sum[:], c.sum[:]) == 1 {
			found = c
		}
	}
	return found, found != nil
}

// admit takes one of c's places and one of its requests per minute, or
// returns the 429 to answer. release gives the place back.
func (c *client) admit(now time.Time) (release func(), refused *apiError) {
	if c == nil {
		return func() {}, nil
	}
	if n := c.inflight.Add(1); c.max > 0 && n > c.max {
		c.inflight.Add(-1)
		return nil, errConcurrency
	}
	if c.rpm != nil {
		res := c.rpm.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			c.inflight.Add(-1)
			return nil, &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded",
				message: "requests per minute exceeded for this API key", retryAfter: d}
		}
	}
	return func() { c.inflight.Add(-1) }, nil
}
