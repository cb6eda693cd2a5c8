package sched_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batchagent/batchagent/sched"
)

func Example() {
	s, err := sched.New(sched.Config{Limit: 8})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	turnsDone := 2 // agents closer to done get the next free slot first
	if err := s.Acquire(ctx, sched.Batch, turnsDone); err != nil {
		return
	}
	// ... the model call runs while the slot is held ...
	s.Release()
	fmt.Printf("%+v\n", s.Stats())
	// Output: {Limit:8 Inflight:0 Waiting:0}
}

func ExampleGate() {
	g, err := sched.NewGate(sched.GateConfig{Limit: 16, RPM: 600, StartWindow: sched.DefaultStartWindow})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	run := g.BeginRun(ctx) // one run of a job; its callers share the gate with every other job's
	defer g.EndRun(run)

	t, err := g.Acquire(ctx, sched.Interactive, 0, 0, 0) // served before any waiting Batch call
	if err != nil {
		return
	}
	// ... the model call runs; a streamed call reports its first event ...
	t.Answering()
	t.Release(sched.Outcome{Signal: sched.SignalOK, Tokens: 1200})

	st := g.Stats()
	fmt.Println(st.Limit, st.Inflight, st.RPM, run.Err())
	// Output: 16 0 600 <nil>
}

func ExampleScheduler_AcquireOrder() {
	// Least attained service first: the caller that has had the least
	// service so far goes next; a continuing caller before any other.
	s, err := sched.New(sched.Config{Limit: 4, Policy: sched.PolicyLAS})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	o := sched.Order{Attained: 1500 * time.Millisecond, Continuing: true}
	if err := s.AcquireOrder(ctx, sched.Batch, 0, o); err != nil {
		return
	}
	// ... the model call runs while the slot is held ...
	s.Release()
	fmt.Println(sched.PolicyLAS, s.Stats().Inflight)
	// Output: las 0
}
