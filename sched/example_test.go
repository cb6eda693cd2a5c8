package sched_test

import (
	"context"
	"fmt"

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
