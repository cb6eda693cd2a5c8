package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
)

// clock is a tool that records, for each execution, the fake time since
// start at which it began, and then takes d.
type clock struct {
	name      string
	cacheable bool
	start     time.Time
	d         time.Duration

	mu      sync.Mutex // protects started, running and peak
	started []time.Duration
	running int
	peak    int
}

func newClock(name string, d time.Duration) *clock {
	return &clock{name: name, start: time.Now(), d: d}
}

func (c *clock) Spec() tool.Spec { return tool.Spec{Name: c.name, Cacheable: c.cacheable} }

func (c *clock) Call(ctx context.Context, args json.RawMessage) (string, error) {
	c.mu.Lock()
	c.started = append(c.started, time.Since(c.start))
	c.running++
	c.peak = max(c.peak, c.running)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	if c.d > 0 {
		t := time.NewTimer(c.d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
	return c.name + string(args), nil
}

// starts returns the start times of the executions so far, sorted.
func (c *clock) starts() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(slices.Values(c.started))
}

func (c *clock) peakRunning() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

// callN starts n calls of name with distinct arguments {"i":0}, {"i":1}, …
// and waits for them all; it fails the test on any error.
func callN(t *testing.T, p *tool.Pool, name string, n int) {
	t.Helper()
	var chans []<-chan callResult
	for i := range n {
		chans = append(chans, goCall(t.Context(), p, name, fmt.Sprintf(`{"i":%d}`, i)))
	}
	for i, ch := range chans {
		if r := <-ch; r.err != nil {
			t.Errorf("call %d: Call error = %v, want nil", i, r.err)
		}
	}
}

func TestPolicyRateSpacing(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		policy tool.Policy
		calls  int
		want   []time.Duration
	}{
		{name: "burst 1", policy: tool.Policy{Rate: 4, Burst: 1}, calls: 5, want: []time.Duration{0, 250 * ms, 500 * ms, 750 * ms, 1000 * ms}},
		{name: "burst defaults to ceil(rate)", policy: tool.Policy{Rate: 2}, calls: 4, want: []time.Duration{0, 0, 500 * ms, 1000 * ms}},
		{name: "burst defaults to ceil(rate) above 1", policy: tool.Policy{Rate: 2.5}, calls: 4, want: []time.Duration{0, 0, 0, 400 * ms}},
		{name: "explicit burst", policy: tool.Policy{Rate: 4, Burst: 3}, calls: 5, want: []time.Duration{0, 0, 0, 250 * ms, 500 * ms}},
		{name: "burst defaults to 1 below 1/s", policy: tool.Policy{Rate: 0.5}, calls: 3, want: []time.Duration{0, 2000 * ms, 4000 * ms}},
		{name: "unlimited", calls: 4, want: []time.Duration{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClock("api", 0)
				p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"api": tt.policy}}, c)
				callN(t, p, "api", tt.calls)
				if diff := cmp.Diff(tt.want, c.starts()); diff != "" {
					t.Errorf("execution start times (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestPolicyRateIsPerTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limited, free := newClock("limited", 0), newClock("free", 0)
		p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"limited": {Rate: 1}}}, limited, free)
		callN(t, p, "limited", 2)
		callN(t, p, "free", 3)
		if diff := cmp.Diff([]time.Duration{0, time.Second}, limited.starts()); diff != "" {
			t.Errorf("limited start times (-want +got):\n%s", diff)
		}
		// free ran after limited's calls returned, at 1s, all at once.
		if diff := cmp.Diff([]time.Duration{time.Second, time.Second, time.Second}, free.starts()); diff != "" {
			t.Errorf("free start times (-want +got):\n%s", diff)
		}
	})
}

func TestPolicyCallerLeavesWhileWaiting(t *testing.T) {
	tests := []struct {
		name   string
		policy tool.Policy
		d      time.Duration // the tool's duration
		// wantThird is when the third call starts executing: the second's
		// place in the queue was given back.
		wantThird time.Duration
	}{
		{name: "waiting for a rate token", policy: tool.Policy{Rate: 1}, wantThird: time.Second},
		{name: "waiting for a concurrency slot", policy: tool.Policy{MaxConcurrent: 1}, d: time.Second, wantThird: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClock("api", tt.d)
				p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"api": tt.policy}}, c)
				first := goCall(t.Context(), p, "api", `{"i":1}`)
				synctest.Wait()
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				defer cancel()
				start := time.Now()
				if _, err := p.Call(ctx, "api", json.RawMessage(`{"i":2}`)); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Call with a 100ms deadline: error = %v, want context.DeadlineExceeded", err)
				}
				if waited := time.Since(start); waited != 100*time.Millisecond {
					t.Errorf("the leaving caller waited %v, want 100ms (its own deadline)", waited)
				}
				if r := <-first; r.err != nil {
					t.Fatalf("first Call error = %v", r.err)
				}
				synctest.Wait() // the abandoned execution has given its place back
				if _, err := p.Call(t.Context(), "api", json.RawMessage(`{"i":3}`)); err != nil {
					t.Fatalf("third Call error = %v", err)
				}
				if diff := cmp.Diff([]time.Duration{0, tt.wantThird}, c.starts()); diff != "" {
					t.Errorf("execution start times (-want +got):\n%s", diff)
				}
				want := []tool.Stats{{Name: "api", Requested: 3, Executed: 3, Errors: 1}}
				if diff := cmp.Diff(want, p.Stats()); diff != "" {
					t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestPolicyMaxConcurrent(t *testing.T) {
	tests := []struct {
		max, calls int
		wantPeak   int
		wantWall   time.Duration // each call takes 1s
	}{
		{max: 1, calls: 4, wantPeak: 1, wantWall: 4 * time.Second},
		{max: 3, calls: 10, wantPeak: 3, wantWall: 4 * time.Second},
		{max: 0, calls: 10, wantPeak: 10, wantWall: time.Second},
		{max: 20, calls: 10, wantPeak: 10, wantWall: time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("max %d calls %d", tt.max, tt.calls), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClock("api", time.Second)
				p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"api": {MaxConcurrent: tt.max}}}, c)
				start := time.Now()
				callN(t, p, "api", tt.calls)
				if got := c.peakRunning(); got != tt.wantPeak {
					t.Errorf("peak concurrent executions = %d, want %d", got, tt.wantPeak)
				}
				if got := time.Since(start); got != tt.wantWall {
					t.Errorf("wall time = %v, want %v", got, tt.wantWall)
				}
			})
		})
	}
}

func TestPolicyTimeout(t *testing.T) {
	tests := []struct {
		name     string
		cfg      tool.PoolConfig
		d        time.Duration // the tool's duration
		wantErr  string
		wantTime time.Duration // when Call returns
	}{
		{
			name:     "policy overrides the pool",
			cfg:      tool.PoolConfig{Timeout: 30 * time.Second, Policies: map[string]tool.Policy{"api": {Timeout: 5 * time.Second}}},
			d:        time.Minute,
			wantErr:  "tool api: tool: timed out after 5s",
			wantTime: 5 * time.Second,
		},
		{
			name:     "pool default",
			cfg:      tool.PoolConfig{Timeout: 30 * time.Second, Policies: map[string]tool.Policy{"api": {Rate: 1}}},
			d:        time.Minute,
			wantErr:  "tool api: tool: timed out after 30s",
			wantTime: 30 * time.Second,
		},
		{
			name:     "policy without a pool timeout",
			cfg:      tool.PoolConfig{Policies: map[string]tool.Policy{"api": {Timeout: time.Second}}},
			d:        time.Minute,
			wantErr:  "tool api: tool: timed out after 1s",
			wantTime: time.Second,
		},
		{
			name:     "within the policy's timeout",
			cfg:      tool.PoolConfig{Timeout: time.Second, Policies: map[string]tool.Policy{"api": {Timeout: time.Minute}}},
			d:        30 * time.Second,
			wantTime: 30 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClock("api", tt.d)
				p := newPool(t, tt.cfg, c)
				start := time.Now()
				_, err := p.Call(t.Context(), "api", nil)
				if got := time.Since(start); got != tt.wantTime {
					t.Errorf("Call returned after %v, want %v", got, tt.wantTime)
				}
				switch {
				case tt.wantErr == "" && err != nil:
					t.Errorf("Call error = %v, want nil", err)
				case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !errors.Is(err, tool.ErrTimeout)):
					t.Errorf("Call error = %v, want %q wrapping ErrTimeout", err, tt.wantErr)
				}
			})
		})
	}
}

func TestPolicyTimeoutExcludesWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each execution takes 1.5s within a 2s timeout; the second waits 1s
		// for its token first, which must not count.
		c := newClock("api", 1500*time.Millisecond)
		p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"api": {Rate: 1, Timeout: 2 * time.Second}}}, c)
		start := time.Now()
		callN(t, p, "api", 2)
		if got, want := time.Since(start), 2500*time.Millisecond; got != want {
			t.Errorf("wall time = %v, want %v", got, want)
		}
	})
}

func TestPolicyNoCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("send", true) // cacheable, yet every call must run
		p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"send": {NoCoalesce: true}}}, g)
		const n = 5
		var chans []<-chan callResult
		for range n {
			chans = append(chans, goCall(t.Context(), p, "send", `{"to":"a"}`))
		}
		synctest.Wait()
		close(g.release)
		for i, ch := range chans {
			if r := <-ch; r.res != `send{"to":"a"}` || r.err != nil {
				t.Errorf("caller %d: Call = %q, %v, want %q, nil", i, r.res, r.err, `send{"to":"a"}`)
			}
		}
		if _, err := p.Call(t.Context(), "send", json.RawMessage(`{"to":"a"}`)); err != nil {
			t.Fatal(err)
		}
		if args, _ := g.seen(); len(args) != n+1 {
			t.Errorf("tool executions = %d, want %d", len(args), n+1)
		}
		want := []tool.Stats{{Name: "send", Requested: n + 1, Executed: n + 1}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestPoolIdempotent: a tool is idempotent unless its policy sets
// NoCoalesce or its Spec sets NotIdempotent; a name the pool does not have
// is not.
func TestPoolIdempotent(t *testing.T) {
	noop := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	charge := tool.Func(tool.Spec{Name: "charge", NotIdempotent: true}, noop)
	p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"send": {NoCoalesce: true}, "read": {Rate: 5}}},
		newGated("send", true), newGated("read", true), newGated("plain", false), charge)
	for name, want := range map[string]bool{"send": false, "read": true, "plain": true, "charge": false, "missing": false} {
		if got := p.Idempotent(name); got != want {
			t.Errorf("Idempotent(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPolicyCacheHitsAndCoalescedCallsTakeNoToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClock("api", 100*time.Millisecond)
		c.cacheable = true
		p := newPool(t, tool.PoolConfig{Policies: map[string]tool.Policy{"api": {Rate: 1, MaxConcurrent: 1}}}, c)
		// Five identical concurrent calls: one execution, four coalesced.
		var chans []<-chan callResult
		for range 5 {
			chans = append(chans, goCall(t.Context(), p, "api", `{"q":"same"}`))
		}
		for _, ch := range chans {
			if r := <-ch; r.err != nil {
				t.Fatalf("Call error = %v", r.err)
			}
		}
		// Cache hits, at once.
		before := time.Now()
		for range 5 {
			if _, err := p.Call(t.Context(), "api", json.RawMessage(`{"q":"same"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if waited := time.Since(before); waited != 0 {
			t.Errorf("cache hits waited %v, want 0", waited)
		}
		// A new call gets the second token, due at 1s: only one was taken.
		if _, err := p.Call(t.Context(), "api", json.RawMessage(`{"q":"other"}`)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]time.Duration{0, time.Second}, c.starts()); diff != "" {
			t.Errorf("execution start times (-want +got):\n%s", diff)
		}
		want := []tool.Stats{{Name: "api", Requested: 11, Executed: 2, Coalesced: 4, CacheHits: 5}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestNewPoolPolicyErrors(t *testing.T) {
	var calls atomic.Int64
	plain := echo("plain", false, &calls)
	batcher := newKeyed("lookup", false)
	tests := []struct {
		name     string
		policies map[string]tool.Policy
		want     []string
	}{
		{name: "unknown tools", policies: map[string]tool.Policy{"zeta": {}, "plain": {}, "alpha": {Rate: 1}}, want: []string{"tool: policies for unknown tools: alpha, zeta"}},
		{name: "negative rate", policies: map[string]tool.Policy{"plain": {Rate: -1}}, want: []string{"tool plain: policy: Rate -1, want a finite number >= 0"}},
		{name: "infinite rate", policies: map[string]tool.Policy{"plain": {Rate: math.Inf(1)}}, want: []string{"tool plain: policy: Rate +Inf"}},
		{name: "negative burst", policies: map[string]tool.Policy{"plain": {Rate: 1, Burst: -1}}, want: []string{"tool plain: policy: negative Burst -1"}},
		{name: "negative max concurrent", policies: map[string]tool.Policy{"plain": {MaxConcurrent: -2}}, want: []string{"tool plain: policy: negative MaxConcurrent -2"}},
		{name: "negative timeout", policies: map[string]tool.Policy{"plain": {Timeout: -time.Second}}, want: []string{"tool plain: policy: negative Timeout -1s"}},
		{name: "negative batch window", policies: map[string]tool.Policy{"lookup": {BatchWindow: -time.Second}}, want: []string{"tool lookup: policy: negative BatchWindow -1s"}},
		{name: "negative batch max", policies: map[string]tool.Policy{"lookup": {BatchMax: -1}}, want: []string{"tool lookup: policy: negative BatchMax -1"}},
		{name: "batching a plain tool", policies: map[string]tool.Policy{"plain": {BatchMax: 5}}, want: []string{"tool plain: policy: BatchWindow and BatchMax apply only to batchable tools"}},
		{
			name:     "every problem",
			policies: map[string]tool.Policy{"plain": {Rate: -1, MaxConcurrent: -1}, "nope": {}},
			want:     []string{"Rate -1", "negative MaxConcurrent", "unknown tools: nope"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tool.NewPool([]tool.Tool{plain, batcher}, tool.PoolConfig{Policies: tt.policies})
			if err == nil {
				t.Fatalf("NewPool() = %v, nil, want an error", p)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("NewPool() error = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestNewPoolPolicyValid(t *testing.T) {
	var calls atomic.Int64
	policies := map[string]tool.Policy{
		"plain":  {Rate: 10, Burst: 2, MaxConcurrent: 4, Timeout: time.Second, NoCoalesce: true},
		"lookup": {BatchWindow: time.Millisecond, BatchMax: 1},
	}
	if _, err := tool.NewPool([]tool.Tool{echo("plain", false, &calls), newKeyed("lookup", false)}, tool.PoolConfig{Policies: policies}); err != nil {
		t.Errorf("NewPool() error = %v, want nil", err)
	}
}
