package router_test

import (
	"context"
	"testing"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/router"
)

// BenchmarkGenerate measures the router's own cost per call (pick,
// breaker, release) over two deployments that answer at once.
func BenchmarkGenerate(b *testing.B) {
	r, err := router.New(router.Config{Deployments: []router.Deployment{
		{Model: &fakeModel{name: "a"}, MaxInflight: 1 << 20}, {Model: &fakeModel{name: "b"}, MaxInflight: 1 << 20}}})
	if err != nil {
		b.Fatal(err)
	}
	req := &llm.Request{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Generate(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
