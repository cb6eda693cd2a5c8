package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
)

// memCache is a hand-written tool.Cache in memory. It keeps values for
// keep when set (ignoring the ttl it is given, to check that the pool does
// not trust the store's expiry), else for their ttl; with err set, every
// call fails.
type memCache struct {
	keep time.Duration
	err  error

	mu   sync.Mutex // protects m and gets
	m    map[string]memValue
	gets int
}

type memValue struct {
	v       []byte
	expires time.Time
}

func (c *memCache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets++
	if c.err != nil {
		return nil, false, c.err
	}
	v, ok := c.m[key]
	if !ok || !time.Now().Before(v.expires) {
		return nil, false, nil
	}
	return bytes.Clone(v.v), true, nil
}

func (c *memCache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.m == nil {
		c.m = make(map[string]memValue)
	}
	if c.keep > 0 {
		ttl = c.keep
	}
	c.m[key] = memValue{bytes.Clone(value), time.Now().Add(ttl)}
	return nil
}

func (c *memCache) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ks []string
	for k := range c.m {
		ks = append(ks, k)
	}
	return ks
}

// call calls name with args on p, failing the test on error.
func call(t *testing.T, p *tool.Pool, name, args string) string {
	t.Helper()
	got, err := p.Call(t.Context(), name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("Call(%s, %s) = %v", name, args, err)
	}
	return got
}

// TestPoolSharedCache checks that two pools with one shared cache run a
// cacheable tool once for calls with the same canonical arguments, that
// other arguments, other tools and uncacheable tools do not share, and
// the keys the cache sees.
func TestPoolSharedCache(t *testing.T) {
	shared := &memCache{}
	var calls, other, plain atomic.Int64
	pools := make([]*tool.Pool, 2)
	for i := range pools {
		pools[i] = newPool(t, tool.PoolConfig{Shared: shared},
			echo("lookup", true, &calls), echo("other", true, &other), echo("plain", false, &plain))
	}
	if got := call(t, pools[0], "lookup", `{"a":1,"b":2}`); got != `lookup{"a":1,"b":2}` {
		t.Fatalf("first call = %q", got)
	}
	// The same canonical arguments on the other pool: a shared hit.
	if got := call(t, pools[1], "lookup", `{ "b": 2, "a": 1 }`); got != `lookup{"a":1,"b":2}` {
		t.Errorf("second pool's call = %q, want the first pool's result", got)
	}
	call(t, pools[1], "lookup", `{"a":1,"b":2}`) // a local hit now
	call(t, pools[1], "lookup", `{"a":2}`)
	call(t, pools[1], "other", `{"a":1,"b":2}`)
	call(t, pools[0], "plain", `{}`)
	call(t, pools[1], "plain", `{}`)
	if calls.Load() != 2 || other.Load() != 1 || plain.Load() != 2 {
		t.Errorf("executions: lookup %d, other %d, plain %d; want 2 (two argument sets), 1, 2 (not cacheable)",
			calls.Load(), other.Load(), plain.Load())
	}
	want := tool.Stats{Name: "lookup", Requested: 3, Executed: 1, CacheHits: 2, SharedHits: 1}
	if diff := cmp.Diff(want, pools[1].Stats()[0]); diff != "" {
		t.Errorf("second pool's Stats (-want +got):\n%s", diff)
	}
	keyRE := regexp.MustCompile(`^(lookup|other):[0-9a-f]{64}$`)
	keys := shared.keys()
	for _, k := range keys {
		if !keyRE.MatchString(k) {
			t.Errorf("shared cache key %q, want the tool's name, a colon and a SHA-256", k)
		}
	}
	if len(keys) != 3 {
		t.Errorf("shared cache holds %d keys %v, want 3 (lookup twice, other once)", len(keys), keys)
	}
}

// TestPoolSharedCacheExpiry checks that a result found in the shared cache
// expires CacheTTL after it was executed, in the pool that found it too,
// even where the store keeps it longer.
func TestPoolSharedCacheExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := &memCache{keep: time.Hour}
		var calls atomic.Int64
		cfg := tool.PoolConfig{Shared: shared, CacheTTL: time.Minute}
		a := newPool(t, cfg, echo("lookup", true, &calls))
		b := newPool(t, cfg, echo("lookup", true, &calls))
		call(t, a, "lookup", `{}`)
		time.Sleep(30 * time.Second)
		call(t, b, "lookup", `{}`) // a shared hit, valid 30s more
		time.Sleep(29 * time.Second)
		call(t, b, "lookup", `{}`) // a local hit
		if n := calls.Load(); n != 1 {
			t.Fatalf("executions within the TTL = %d, want 1", n)
		}
		time.Sleep(2 * time.Second)
		call(t, b, "lookup", `{}`) // expired locally, and in the shared value
		if n := calls.Load(); n != 2 {
			t.Errorf("executions after the TTL = %d, want 2", n)
		}
	})
}

// TestPoolSharedCacheFailing checks that a failing shared cache leaves the
// tools running, is left alone for a while after it failed, and logs once
// while it fails and once when it recovers.
func TestPoolSharedCacheFailing(t *testing.T) {
	synctest.Test(t, testPoolSharedCacheFailing)
}

func testPoolSharedCacheFailing(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex // protects logs
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	shared := &memCache{err: errors.New("cache down")}
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{Shared: shared, Logger: logger}, echo("lookup", true, &calls))
	for _, args := range []string{`{"a":1}`, `{"a":2}`, `{"a":3}`} {
		if got := call(t, p, "lookup", args); got != "lookup"+args {
			t.Errorf("Call with the shared cache down = %q, want %q", got, "lookup"+args)
		}
	}
	shared.mu.Lock()
	shared.err = nil
	gets := shared.gets
	shared.mu.Unlock()
	if gets != 1 {
		t.Errorf("shared cache asked %d times by 3 calls while it failed, want once (then left alone)", gets)
	}
	time.Sleep(6 * time.Second)
	call(t, p, "lookup", `{"a":4}`)
	if n := calls.Load(); n != 4 {
		t.Errorf("executions = %d, want 4", n)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if n := strings.Count(out, "shared tool cache failing"); n != 1 {
		t.Errorf("logged %d warnings of a failing shared cache, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "shared tool cache answering again"); n != 1 {
		t.Errorf("logged %d recoveries of the shared cache, want 1:\n%s", n, out)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
