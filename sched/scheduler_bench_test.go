package sched_test

import (
	"testing"

	"github.com/batchagent/batchagent/sched"
)

func BenchmarkAcquireRelease(b *testing.B) {
	s, _ := sched.New(sched.Config{Limit: 64})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Acquire(b.Context(), sched.Batch, 1); err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	})
}

// BenchmarkContended has four times more goroutines than slots, so most
// acquisitions go through the wait heap.
func BenchmarkContended(b *testing.B) {
	s, _ := sched.New(sched.Config{Limit: 2})
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := s.Acquire(b.Context(), sched.Batch, i%3); err != nil {
				b.Fatal(err)
			}
			i++
			s.Release()
		}
	})
}
