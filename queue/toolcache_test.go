package queue_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/queue"
	"github.com/batchagent/batchagent/tool"
)

var _ tool.Cache = (*queue.ToolCache)(nil)

// lookupTool returns a cacheable tool that counts its executions.
func lookupTool(calls *atomic.Int64) tool.Tool {
	return tool.Func(tool.Spec{Name: "lookup", Cacheable: true}, func(ctx context.Context, args json.RawMessage) (string, error) {
		calls.Add(1)
		return "found " + string(args), nil
	})
}

func newToolPool(t *testing.T, cfg tool.PoolConfig, tools ...tool.Tool) *tool.Pool {
	t.Helper()
	p, err := tool.NewPool(tools, cfg)
	if err != nil {
		t.Fatalf("NewPool = %v", err)
	}
	return p
}

func callTool(t *testing.T, p *tool.Pool, args string) string {
	t.Helper()
	got, err := p.Call(t.Context(), "lookup", json.RawMessage(args))
	if err != nil {
		t.Fatalf("Call(lookup, %s) = %v", args, err)
	}
	return got
}

// TestToolCacheShared checks that two pools, as two workers hold, share
// a cacheable tool's results through Redis: the second pool's call hits,
// and the tool runs once.
func TestToolCacheShared(t *testing.T) {
	rdb, _ := limitRedis(t)
	var calls atomic.Int64
	cache := queue.NewToolCache(rdb, "ba:tool:")
	a := newToolPool(t, tool.PoolConfig{Shared: cache}, lookupTool(&calls))
	b := newToolPool(t, tool.PoolConfig{Shared: cache}, lookupTool(&calls))
	first := callTool(t, a, `{"q":"x","n":1}`)
	if got := callTool(t, b, `{"n":1,"q":"x"}`); got != first {
		t.Errorf("second pool's call = %q, want the first's %q", got, first)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("tool executed %d times across two pools, want 1", n)
	}
	if st := b.Stats()[0]; st.SharedHits != 1 || st.Executed != 0 {
		t.Errorf("second pool's Stats = %+v, want 1 shared hit and no execution", st)
	}
	keys, err := rdb.Keys(t.Context(), "ba:tool:lookup:*").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("Redis keys ba:tool:lookup:* = %v (%v), want one", keys, err)
	}
}

// TestToolCacheTTL checks that results expire in Redis after the pool's
// CacheTTL: a pool that comes later runs the tool again.
func TestToolCacheTTL(t *testing.T) {
	rdb, _ := limitRedis(t)
	var calls atomic.Int64
	cache := queue.NewToolCache(rdb, "ba:tool:")
	cfg := tool.PoolConfig{Shared: cache, CacheTTL: 300 * time.Millisecond}
	callTool(t, newToolPool(t, cfg, lookupTool(&calls)), `{}`)
	keys, err := rdb.Keys(t.Context(), "ba:tool:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("Redis keys ba:tool:* = %v (%v), want one", keys, err)
	}
	if ttl, err := rdb.PTTL(t.Context(), keys[0]).Result(); err != nil || ttl <= 0 || ttl > 300*time.Millisecond {
		t.Errorf("PTTL(%s) = %v (%v), want in (0, 300ms]", keys[0], ttl, err)
	}
	time.Sleep(400 * time.Millisecond) // past the TTL in Redis's clock: not a timing assertion
	callTool(t, newToolPool(t, cfg, lookupTool(&calls)), `{}`)
	if n := calls.Load(); n != 2 {
		t.Errorf("tool executed %d times, want 2: the shared result expired", n)
	}
}

// TestToolCacheRedisDown checks that a pool whose shared cache is down
// still runs its tools.
func TestToolCacheRedisDown(t *testing.T) {
	rdb, srv := limitRedis(t)
	srv.Stop()
	var calls atomic.Int64
	p := newToolPool(t, tool.PoolConfig{Shared: queue.NewToolCache(rdb, "ba:tool:")}, lookupTool(&calls))
	start := time.Now()
	if got := callTool(t, p, `{"q":1}`); got != `found {"q":1}` {
		t.Errorf("Call with Redis down = %q, want the tool's answer", got)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("tool executed %d times, want 1", n)
	}
	t.Logf("a call with Redis down took %v", time.Since(start))
}

// TestToolCacheErrors checks the errors of ToolCache itself.
func TestToolCacheErrors(t *testing.T) {
	rdb, srv := limitRedis(t)
	c := queue.NewToolCache(rdb, "ba:tool:")
	if _, ok, err := c.Get(t.Context(), "none"); ok || err != nil {
		t.Errorf("Get(none) = ok %v, %v; want a miss", ok, err)
	}
	if err := c.Set(t.Context(), "k", []byte("v"), 0); err == nil {
		t.Error("Set with ttl 0 = nil error, want error")
	}
	srv.Stop()
	if _, _, err := c.Get(t.Context(), "k"); err == nil {
		t.Error("Get with Redis down = nil error, want error")
	}
}
