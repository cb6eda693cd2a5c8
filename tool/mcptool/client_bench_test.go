package mcptool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/batchagent/batchagent/tool/mcptool"
)

// benchClient connects to the stdio test server for a benchmark.
func benchClient(b *testing.B) *mcptool.Client {
	b.Helper()
	cfg := stdioConfig("1")
	cfg.Tools = []string{"echo"}
	c, err := mcptool.Connect(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	})
	return c
}

// BenchmarkCall measures one call's round trip to a stdio server.
func BenchmarkCall(b *testing.B) {
	echo := benchClient(b).Tools()[0]
	args := json.RawMessage(`{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := echo.Call(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallParallel measures calls from many goroutines sharing the
// session.
func BenchmarkCallParallel(b *testing.B) {
	echo := benchClient(b).Tools()[0]
	args := json.RawMessage(`{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := echo.Call(ctx, args); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
