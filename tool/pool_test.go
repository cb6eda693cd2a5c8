package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
)

// newPool builds a pool of tools or fails the test.
func newPool(t *testing.T, cfg tool.PoolConfig, tools ...tool.Tool) *tool.Pool {
	t.Helper()
	p, err := tool.NewPool(tools, cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	return p
}

// echo returns a tool that answers "name(args)" and counts its executions.
func echo(name string, cacheable bool, calls *atomic.Int64) tool.Tool {
	return tool.Func(tool.Spec{Name: name, Cacheable: cacheable}, func(ctx context.Context, args json.RawMessage) (string, error) {
		calls.Add(1)
		return name + string(args), nil
	})
}

// gated returns a tool that blocks until release is closed (or its context
// is done) and then answers "name(args)". It records the arguments it was
// given and its context's error.
type gated struct {
	name      string
	cacheable bool
	release   chan struct{}

	mu      sync.Mutex // protects args and ctxErrs
	args    []string
	ctxErrs []error
}

func newGated(name string, cacheable bool) *gated {
	return &gated{name: name, cacheable: cacheable, release: make(chan struct{})}
}

func (g *gated) Spec() tool.Spec { return tool.Spec{Name: g.name, Cacheable: g.cacheable} }

func (g *gated) Call(ctx context.Context, args json.RawMessage) (string, error) {
	var err error
	select {
	case <-g.release:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.args = append(g.args, string(args))
	g.ctxErrs = append(g.ctxErrs, ctx.Err())
	if err != nil {
		return "", err
	}
	return g.name + string(args), nil
}

func (g *gated) seen() (args []string, ctxErrs []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.args...), append([]error(nil), g.ctxErrs...)
}

type callResult struct {
	res string
	err error
}

// goCall starts p.Call in a goroutine; the result arrives on the returned
// channel.
func goCall(ctx context.Context, p *tool.Pool, name, args string) <-chan callResult {
	ch := make(chan callResult, 1) // the goroutine never blocks on send
	go func() {
		res, err := p.Call(ctx, name, json.RawMessage(args))
		ch <- callResult{res, err}
	}()
	return ch
}

func TestPoolCoalescesIdenticalCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("slow", false)
		p := newPool(t, tool.PoolConfig{}, g)
		const n = 50
		var chans []<-chan callResult
		for range n {
			chans = append(chans, goCall(t.Context(), p, "slow", `{"a":1}`))
		}
		synctest.Wait() // every caller is waiting
		close(g.release)
		for i, ch := range chans {
			if r := <-ch; r.res != `slow{"a":1}` || r.err != nil {
				t.Errorf("caller %d: Call = %q, %v, want %q, nil", i, r.res, r.err, `slow{"a":1}`)
			}
		}
		want := []tool.Stats{{Name: "slow", Requested: n, Executed: 1, Coalesced: n - 1}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestPoolCanonicalArgumentsCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("slow", false)
		p := newPool(t, tool.PoolConfig{}, g)
		a := goCall(t.Context(), p, "slow", `{"a":1,"b":2}`)
		b := goCall(t.Context(), p, "slow", "{ \"b\":2,\n \"a\":1 }")
		synctest.Wait()
		close(g.release)
		for _, ch := range []<-chan callResult{a, b} {
			if r := <-ch; r.res != `slow{"a":1,"b":2}` || r.err != nil {
				t.Errorf("Call = %q, %v, want %q, nil", r.res, r.err, `slow{"a":1,"b":2}`)
			}
		}
		args, _ := g.seen()
		if diff := cmp.Diff([]string{`{"a":1,"b":2}`}, args); diff != "" {
			t.Errorf("tool executions (-want +got):\n%s", diff)
		}
	})
}

func TestPoolDifferentArgumentsExecuteSeparately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("slow", false)
		p := newPool(t, tool.PoolConfig{}, g)
		a := goCall(t.Context(), p, "slow", `{"a":1}`)
		b := goCall(t.Context(), p, "slow", `{"a":2}`)
		synctest.Wait()
		close(g.release)
		if r := <-a; r.res != `slow{"a":1}` {
			t.Errorf("Call(a=1) = %q, %v, want %q", r.res, r.err, `slow{"a":1}`)
		}
		if r := <-b; r.res != `slow{"a":2}` {
			t.Errorf("Call(a=2) = %q, %v, want %q", r.res, r.err, `slow{"a":2}`)
		}
		want := []tool.Stats{{Name: "slow", Requested: 2, Executed: 2}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestPoolSameArgumentsDifferentToolsExecuteSeparately(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{}, echo("a", true, &calls), echo("b", true, &calls))
	for _, name := range []string{"a", "b"} {
		if res, err := p.Call(t.Context(), name, json.RawMessage(`{}`)); res != name+"{}" || err != nil {
			t.Errorf("Call(%s) = %q, %v, want %q, nil", name, res, err, name+"{}")
		}
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("executions = %d, want 2", got)
	}
}

func TestPoolCache(t *testing.T) {
	tests := []struct {
		name          string
		cacheable     bool
		cfg           tool.PoolConfig
		wantExecuted  int64
		wantCacheHits int64
	}{
		{name: "cacheable", cacheable: true, wantExecuted: 1, wantCacheHits: 2},
		{name: "not cacheable", cacheable: false, wantExecuted: 3},
		{name: "cache disabled", cacheable: true, cfg: tool.PoolConfig{CacheSize: -1}, wantExecuted: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			p := newPool(t, tt.cfg, echo("e", tt.cacheable, &calls))
			for _, args := range []string{`{"x":1,"y":2}`, `{"y":2,"x":1}`, ` {"x":1, "y":2} `} {
				if res, err := p.Call(t.Context(), "e", json.RawMessage(args)); res != `e{"x":1,"y":2}` || err != nil {
					t.Fatalf("Call(%s) = %q, %v, want %q, nil", args, res, err, `e{"x":1,"y":2}`)
				}
			}
			want := []tool.Stats{{Name: "e", Requested: 3, Executed: tt.wantExecuted, CacheHits: tt.wantCacheHits}}
			if diff := cmp.Diff(want, p.Stats()); diff != "" {
				t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
			}
			if calls.Load() != tt.wantExecuted {
				t.Errorf("tool ran %d times, want %d", calls.Load(), tt.wantExecuted)
			}
		})
	}
}

func TestPoolErrorsAreNotCached(t *testing.T) {
	var calls atomic.Int64
	flaky := tool.Func(tool.Spec{Name: "flaky", Cacheable: true}, func(ctx context.Context, args json.RawMessage) (string, error) {
		if calls.Add(1) == 1 {
			return "", errors.New("try again")
		}
		return "ok", nil
	})
	p := newPool(t, tool.PoolConfig{}, flaky)
	if _, err := p.Call(t.Context(), "flaky", nil); err == nil || err.Error() != "tool flaky: try again" {
		t.Fatalf("first Call error = %v, want tool flaky: try again", err)
	}
	for range 2 {
		if res, err := p.Call(t.Context(), "flaky", nil); res != "ok" || err != nil {
			t.Fatalf("Call = %q, %v, want ok, nil", res, err)
		}
	}
	want := []tool.Stats{{Name: "flaky", Requested: 3, Executed: 2, CacheHits: 1, Errors: 1}}
	if diff := cmp.Diff(want, p.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
}

func TestPoolCacheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		p := newPool(t, tool.PoolConfig{CacheTTL: time.Minute}, echo("e", true, &calls))
		call := func() {
			t.Helper()
			if res, err := p.Call(t.Context(), "e", json.RawMessage(`{}`)); res != "e{}" || err != nil {
				t.Fatalf("Call = %q, %v, want e{}, nil", res, err)
			}
		}
		call()
		time.Sleep(time.Minute - time.Second)
		call() // cached
		if got := calls.Load(); got != 1 {
			t.Fatalf("executions before the TTL = %d, want 1", got)
		}
		time.Sleep(2 * time.Second)
		call() // expired
		call() // cached again
		want := []tool.Stats{{Name: "e", Requested: 4, Executed: 2, CacheHits: 2}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestPoolCacheEvictsLeastRecentlyUsed(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{CacheSize: 2}, echo("e", true, &calls))
	for _, n := range []int{1, 2, 1, 3, 1, 2} {
		args := json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
		if _, err := p.Call(t.Context(), "e", args); err != nil {
			t.Fatalf("Call(%s): %v", args, err)
		}
	}
	// 1 run, 2 run, 1 hit, 3 run (evicts 2), 1 hit, 2 run (evicts 3).
	want := []tool.Stats{{Name: "e", Requested: 6, Executed: 4, CacheHits: 2}}
	if diff := cmp.Diff(want, p.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
}

func TestPoolWaiterLeavesOthersGetResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("slow", false)
		p := newPool(t, tool.PoolConfig{}, g)
		// The caller that starts the execution is the one that leaves.
		leaderCtx, leave := context.WithCancel(t.Context())
		leader := goCall(leaderCtx, p, "slow", `{}`)
		synctest.Wait()
		others := []<-chan callResult{goCall(t.Context(), p, "slow", `{}`), goCall(t.Context(), p, "slow", `{}`)}
		synctest.Wait()

		leave()
		if r := <-leader; !errors.Is(r.err, context.Canceled) || r.res != "" {
			t.Fatalf("leaving caller: Call = %q, %v, want \"\", context.Canceled", r.res, r.err)
		}
		close(g.release)
		for i, ch := range others {
			if r := <-ch; r.res != "slow{}" || r.err != nil {
				t.Errorf("caller %d: Call = %q, %v, want slow{}, nil", i, r.res, r.err)
			}
		}
		if _, ctxErrs := g.seen(); !cmp.Equal(ctxErrs, []error{nil}, cmpErrors) {
			t.Errorf("execution context errors = %v, want [<nil>]", ctxErrs)
		}
		want := []tool.Stats{{Name: "slow", Requested: 3, Executed: 1, Coalesced: 2, Errors: 1}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

// cmpErrors compares errors with errors.Is.
var cmpErrors = cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) || errors.Is(b, a) })

func TestPoolAllWaitersLeavingCancelsExecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("slow", false)
		p := newPool(t, tool.PoolConfig{}, g)
		ctx1, leave1 := context.WithCancel(t.Context())
		ctx2, leave2 := context.WithTimeout(t.Context(), time.Second)
		defer leave2()
		c1 := goCall(ctx1, p, "slow", `{}`)
		c2 := goCall(ctx2, p, "slow", `{}`)
		synctest.Wait()

		leave1()
		if r := <-c1; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("first caller: Call error = %v, want context.Canceled", r.err)
		}
		synctest.Wait()
		if args, _ := g.seen(); len(args) != 0 {
			t.Fatalf("execution ended while a caller was still waiting")
		}
		time.Sleep(time.Second) // the second caller's deadline
		if r := <-c2; !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("second caller: Call error = %v, want context.DeadlineExceeded", r.err)
		}
		synctest.Wait() // the execution sees its context cancelled and returns
		if _, ctxErrs := g.seen(); !cmp.Equal(ctxErrs, []error{context.Canceled}, cmpErrors) {
			t.Errorf("execution context errors = %v, want [context canceled]", ctxErrs)
		}

		// The abandoned execution is forgotten: a new call starts afresh.
		c3 := goCall(t.Context(), p, "slow", `{}`)
		synctest.Wait()
		close(g.release)
		if r := <-c3; r.res != "slow{}" || r.err != nil {
			t.Errorf("new caller: Call = %q, %v, want slow{}, nil", r.res, r.err)
		}
		want := []tool.Stats{{Name: "slow", Requested: 3, Executed: 2, Coalesced: 1, Errors: 2}}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestPoolExecutionKeepsCallerValues(t *testing.T) {
	type key struct{}
	var got any
	p := newPool(t, tool.PoolConfig{}, tool.Func(tool.Spec{Name: "v"}, func(ctx context.Context, args json.RawMessage) (string, error) {
		got = ctx.Value(key{})
		return "", nil
	}))
	ctx := context.WithValue(t.Context(), key{}, "trace-1")
	if _, err := p.Call(ctx, "v", nil); err != nil {
		t.Fatal(err)
	}
	if got != "trace-1" {
		t.Errorf("ctx.Value in the tool = %v, want trace-1", got)
	}
}

func TestPoolCallerContextAlreadyDone(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{}, echo("e", false, &calls))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Call(ctx, "e", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Call with a done context: error = %v, want context.Canceled", err)
	}
	if calls.Load() != 0 {
		t.Errorf("tool ran %d times, want 0", calls.Load())
	}
}

func TestPoolPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		boom := tool.Func(tool.Spec{Name: "boom"}, func(ctx context.Context, args json.RawMessage) (string, error) {
			<-release
			panic("kaboom")
		})
		p := newPool(t, tool.PoolConfig{}, boom)
		a := goCall(t.Context(), p, "boom", `{}`)
		b := goCall(t.Context(), p, "boom", `{}`)
		synctest.Wait()
		close(release)
		for _, ch := range []<-chan callResult{a, b} {
			r := <-ch
			var pe *tool.PanicError
			if !errors.As(r.err, &pe) {
				t.Fatalf("Call error = %v, want a *PanicError", r.err)
			}
			if pe.Tool != "boom" || pe.Value != "kaboom" || !strings.Contains(string(pe.Stack), "TestPoolPanic") {
				t.Errorf("PanicError = {Tool: %q, Value: %v, Stack: %d bytes}, want boom, kaboom and a stack naming the tool function", pe.Tool, pe.Value, len(pe.Stack))
			}
			if want := "tool boom: tool boom panicked: kaboom"; r.err.Error() != want {
				t.Errorf("Call error = %q, want %q", r.err, want)
			}
		}
	})
}

func TestPoolGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		quit := tool.Func(tool.Spec{Name: "quit"}, func(ctx context.Context, args json.RawMessage) (string, error) {
			runtime.Goexit()
			return "unreachable", nil
		})
		p := newPool(t, tool.PoolConfig{}, quit)
		if _, err := p.Call(t.Context(), "quit", nil); err == nil || err.Error() != "tool quit: tool function called runtime.Goexit" {
			t.Errorf("Call error = %v, want tool quit: tool function called runtime.Goexit", err)
		}
	})
}

func TestPoolTimeout(t *testing.T) {
	tests := []struct {
		name string
		// honour: the tool returns when its context is done; otherwise it
		// returns only when released.
		honour bool
	}{
		{name: "tool honours its context", honour: true},
		{name: "tool ignores its context", honour: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				deadlines := make(chan time.Time, 2) // one per execution
				slow := tool.Func(tool.Spec{Name: "slow", Cacheable: true}, func(ctx context.Context, args json.RawMessage) (string, error) {
					d, _ := ctx.Deadline()
					deadlines <- d
					if tt.honour {
						<-ctx.Done()
						return "", ctx.Err()
					}
					<-release
					return "late", nil
				})
				p := newPool(t, tool.PoolConfig{Timeout: 30 * time.Second}, slow)
				start := time.Now()
				res, err := p.Call(t.Context(), "slow", nil)
				if !errors.Is(err, tool.ErrTimeout) || err.Error() != "tool slow: tool: timed out after 30s" || res != "" {
					t.Errorf("Call = %q, %v, want \"\", tool slow: tool: timed out after 30s", res, err)
				}
				if elapsed := time.Since(start); elapsed != 30*time.Second {
					t.Errorf("Call returned after %v, want 30s", elapsed)
				}
				if d, want := <-deadlines, start.Add(30*time.Second); !d.Equal(want) {
					t.Errorf("tool context deadline = %v, want %v", d, want)
				}
				close(release)
				synctest.Wait()
				// Whatever the execution returned late, its outcome was the
				// timeout: nothing was cached, so the next call executes.
				res, err = p.Call(t.Context(), "slow", nil)
				want := []tool.Stats{{Name: "slow", Requested: 2, Executed: 2, Errors: 1}}
				if tt.honour {
					want[0].Errors = 2
					if !errors.Is(err, tool.ErrTimeout) {
						t.Errorf("second Call error = %v, want ErrTimeout", err)
					}
				} else if res != "late" || err != nil {
					t.Errorf("second Call = %q, %v, want late, nil", res, err)
				}
				if diff := cmp.Diff(want, p.Stats()); diff != "" {
					t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestPoolTruncation(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		result string
		want   string
	}{
		{name: "short", limit: 10, result: "0123456789", want: "0123456789"},
		{name: "long", limit: 10, result: "0123456789abcdef", want: "0123456789\n[truncated: 10 of 16 bytes shown]"},
		{name: "cut inside a rune", limit: 10, result: "aaaaaaaaaé!", want: "aaaaaaaaa\n[truncated: 9 of 12 bytes shown]"},
		{name: "cut inside a 4-byte rune", limit: 3, result: "a😀b", want: "a\n[truncated: 1 of 6 bytes shown]"},
		{name: "limit inside the first rune", limit: 2, result: "€uro", want: "\n[truncated: 0 of 6 bytes shown]"},
		{name: "not UTF-8", limit: 2, result: "\x80\x80\x80\x80\x80", want: "\x80\x80\n[truncated: 2 of 5 bytes shown]"},
		{name: "no limit", limit: -1, result: strings.Repeat("x", 100<<10), want: strings.Repeat("x", 100<<10)},
		{name: "default limit", limit: 0, result: strings.Repeat("x", 64<<10+1), want: strings.Repeat("x", 64<<10) + "\n[truncated: 65536 of 65537 bytes shown]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			big := tool.Func(tool.Spec{Name: "big", Cacheable: true}, func(ctx context.Context, args json.RawMessage) (string, error) {
				return tt.result, nil
			})
			p := newPool(t, tool.PoolConfig{MaxResultBytes: tt.limit}, big)
			for range 2 { // executed, then cached
				if res, err := p.Call(t.Context(), "big", nil); res != tt.want || err != nil {
					t.Fatalf("Call = %q, %v, want %q, nil", res, err, tt.want)
				}
			}
		})
	}
}

func TestPoolUnknownTool(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{}, echo("a", false, &calls), echo("b", false, &calls))
	_, err := p.Call(t.Context(), "nope", nil)
	var ce *tool.CallError
	if !errors.Is(err, tool.ErrUnknownTool) || !errors.As(err, &ce) || ce.Tool != "nope" {
		t.Fatalf("Call(nope) error = %#v, want a *CallError for nope wrapping ErrUnknownTool", err)
	}
	if want := `tool nope: tool: unknown tool "nope"; available tools: a, b`; err.Error() != want {
		t.Errorf("Call(nope) error = %q, want %q", err, want)
	}
}

func TestPoolBadArguments(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{name: "array", args: `[1,2]`, want: "tool e: tool: bad arguments: arguments must be a JSON object, not an array"},
		{name: "null", args: `null`, want: "tool e: tool: bad arguments: arguments must be a JSON object, not null"},
		{name: "string", args: `"path"`, want: "tool e: tool: bad arguments: arguments must be a JSON object, not a string"},
		{name: "malformed", args: `{"path":`, want: "tool e: tool: bad arguments: unexpected EOF"},
		{name: "invalid character", args: `{path:1}`, want: "tool e: tool: bad arguments: invalid character 'p' looking for beginning of object key string"},
		{name: "two objects", args: `{}{}`, want: "tool e: tool: bad arguments: unexpected data after the arguments object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			p := newPool(t, tool.PoolConfig{}, echo("e", false, &calls))
			_, err := p.Call(t.Context(), "e", json.RawMessage(tt.args))
			if !errors.Is(err, tool.ErrBadArguments) || err.Error() != tt.want {
				t.Fatalf("Call(%s) error = %v, want %q wrapping ErrBadArguments", tt.args, err, tt.want)
			}
			want := []tool.Stats{{Name: "e", Requested: 1, Errors: 1}}
			if diff := cmp.Diff(want, p.Stats()); diff != "" {
				t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPoolBadArgumentsKeepsSyntaxError(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{}, echo("e", false, &calls))
	_, err := p.Call(t.Context(), "e", json.RawMessage(`{"a" 1}`))
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Errorf("Call error = %v, want it to wrap a *json.SyntaxError", err)
	}
}

func TestPoolEmptyArgumentsAreAnEmptyObject(t *testing.T) {
	var calls atomic.Int64
	p := newPool(t, tool.PoolConfig{}, echo("e", false, &calls))
	for _, args := range []json.RawMessage{nil, json.RawMessage(""), json.RawMessage("  ")} {
		if res, err := p.Call(t.Context(), "e", args); res != "e{}" || err != nil {
			t.Errorf("Call(%q) = %q, %v, want e{}, nil", args, res, err)
		}
	}
}

func TestPoolFatalError(t *testing.T) {
	fatal := tool.Func(tool.Spec{Name: "f"}, func(ctx context.Context, args json.RawMessage) (string, error) {
		return "", fmt.Errorf("disk gone: %w", tool.ErrFatal)
	})
	p := newPool(t, tool.PoolConfig{}, fatal)
	_, err := p.Call(t.Context(), "f", nil)
	if !errors.Is(err, tool.ErrFatal) || err.Error() != "tool f: disk gone: tool: fatal" {
		t.Errorf("Call error = %v, want tool f: disk gone: tool: fatal wrapping ErrFatal", err)
	}
}

func TestPoolStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		g := newGated("slow", false)
		p := newPool(t, tool.PoolConfig{}, echo("cached", true, &calls), g, echo("unused", false, &calls))
		for range 3 {
			if _, err := p.Call(t.Context(), "cached", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.Call(t.Context(), "cached", json.RawMessage(`[]`)); err == nil {
			t.Fatal("Call with an array: no error")
		}
		a := goCall(t.Context(), p, "slow", `{}`)
		b := goCall(t.Context(), p, "slow", `{}`)
		c := goCall(t.Context(), p, "slow", `{"other":true}`)
		synctest.Wait()
		close(g.release)
		<-a
		<-b
		<-c
		want := []tool.Stats{
			{Name: "cached", Requested: 4, Executed: 1, CacheHits: 2, Errors: 1},
			{Name: "slow", Requested: 3, Executed: 2, Coalesced: 1},
			{Name: "unused"},
		}
		if diff := cmp.Diff(want, p.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}
