package tool_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/tool"
)

// BenchmarkPoolCacheHit measures the hot path of many agents reading the same
// cached result at once.
func BenchmarkPoolCacheHit(b *testing.B) {
	var calls atomic.Int64
	p, err := tool.NewPool([]tool.Tool{echo("read_file", true, &calls)}, tool.PoolConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := json.RawMessage(`{"path":"src/main.go"}`)
	if _, err := p.Call(ctx, "read_file", args); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Call(ctx, "read_file", args); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if calls.Load() != 1 {
		b.Errorf("tool ran %d times, want 1", calls.Load())
	}
}

// BenchmarkPoolCoalesce measures callers joining executions in flight: 64
// callers per core hammer a non-cacheable tool that takes 100µs, so nearly
// every call waits for an execution another caller started.
func BenchmarkPoolCoalesce(b *testing.B) {
	var execs atomic.Int64
	slow := tool.Func(tool.Spec{Name: "slow"}, func(ctx context.Context, args json.RawMessage) (string, error) {
		execs.Add(1)
		t := time.NewTimer(100 * time.Microsecond)
		defer t.Stop()
		select {
		case <-t.C:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	p, err := tool.NewPool([]tool.Tool{slow}, tool.PoolConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := json.RawMessage(`{"path":"src/main.go"}`)
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Call(ctx, "slow", args); err != nil {
				b.Error(err)
				return
			}
		}
	})
	s := p.Stats()[0]
	b.ReportMetric(float64(s.Coalesced)/float64(s.Requested), "coalesced/op")
}

// BenchmarkCanonicalArgs measures canonicalisation of typical arguments.
func BenchmarkCanonicalArgs(b *testing.B) {
	benchmarks := []struct {
		name string
		args string
	}{
		{name: "canonical", args: `{"path":"src/main.go"}`},
		{name: "spaced", args: `{ "path": "src/main.go" }`},
		{name: "unsorted", args: `{"path":"src/main.go","offset":120,"limit":80}`},
		{name: "nested", args: `{"query":{"text":"error handling","filters":[{"lang":"go","repo":"x"}]},"top_k":5}`},
		{name: "escapes", args: `{"content":"package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n","path":"main.go"}`},
		{name: "slow_path", args: `{"text":"caf\u00e9","path":"a"}`},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			src := []byte(bm.args)
			dst := make([]byte, 0, 256)
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				var err error
				if dst, err = tool.CanonicalArgs(dst[:0], src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPoolLimits measures an execution's cost under each kind of
// limit: callers on every core run an instant tool whose policy sets no
// coalescing (so every call executes) and the limit named.
func BenchmarkPoolLimits(b *testing.B) {
	benchmarks := []struct {
		name   string
		policy tool.Policy
	}{
		{name: "none", policy: tool.Policy{NoCoalesce: true}},
		{name: "max_concurrent", policy: tool.Policy{NoCoalesce: true, MaxConcurrent: 4}},
		{name: "rate", policy: tool.Policy{NoCoalesce: true, Rate: 1e9}},
		{name: "timeout", policy: tool.Policy{NoCoalesce: true, Timeout: time.Minute}},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			var calls atomic.Int64
			p, err := tool.NewPool([]tool.Tool{echo("api", false, &calls)}, tool.PoolConfig{Policies: map[string]tool.Policy{"api": bm.policy}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			args := json.RawMessage(`{"q":"x"}`)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.Call(ctx, "api", args); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPoolBatch measures batching: 64 callers per core send distinct
// keys to an instant Batcher, whose batches close at 64 calls or after
// 100µs.
func BenchmarkPoolBatch(b *testing.B) {
	lookup := tool.BatchFunc(tool.Spec{Name: "lookup"}, func(ctx context.Context, args []json.RawMessage) []tool.Result {
		res := make([]tool.Result, len(args))
		for i := range res {
			res[i].Content = "v"
		}
		return res
	})
	p, err := tool.NewPool([]tool.Tool{lookup}, tool.PoolConfig{Policies: map[string]tool.Policy{
		"lookup": {BatchWindow: 100 * time.Microsecond, BatchMax: 64},
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 32)
		for pb.Next() {
			buf = strconv.AppendInt(append(buf[:0], `{"key":`...), next.Add(1), 10)
			buf = append(buf, '}')
			if _, err := p.Call(ctx, "lookup", buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	s := p.Stats()[0]
	b.ReportMetric(float64(s.Requested)/float64(max(1, s.Batches)), "calls/batch")
}
