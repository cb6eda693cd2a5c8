package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/batchagent/batchagent/queue"
)

// Example shows a coordinator and a worker sharing a run through Redis. It
// needs a redis-server, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	c, err := queue.Open(ctx, "redis://:password@127.0.0.1:6379/0", queue.Options{})
	if err != nil {
		log.Fatal(err) // the password shows as xxxxx
	}
	defer c.Close()

	// Coordinator: register the run (again after a restart: existed is
	// true) and enqueue the inputs from where it stopped.
	st, _, err := c.CreateRun(ctx, queue.Run{ID: "run-1", Job: []byte("prompt: ...\n")})
	if err != nil {
		log.Fatal(err)
	}
	inputs := []json.RawMessage{[]byte(`{"city":"Oslo"}`), []byte(`{"city":"Lima"}`)}
	for i := st.Enqueued; i < len(inputs); i++ {
		if err := c.Enqueue(ctx, "run-1", i, inputs[i]); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.SetTotal(ctx, "run-1", len(inputs)); err != nil {
		log.Fatal(err)
	}

	// Worker: take back the tasks of dead workers, then read new ones; run
	// each agent (checkpointed in c.Checkpointer(), touching its task more
	// often than the 1-minute visibility timeout), record its result, ack.
	const worker = "host-a-1"
	tasks, err := c.Reclaim(ctx, worker, time.Minute, 10)
	if err != nil {
		log.Fatal(err)
	}
	more, err := c.Read(ctx, worker, 10, 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range append(tasks, more...) {
		line := fmt.Appendf(nil, `{"index":%d,"output":{}}`, t.Index) // the agent's result
		if _, err := c.Record(ctx, t.Run, t.Index, line); err != nil {
			log.Fatal(err)
		}
		if err := c.Ack(ctx, t); err != nil {
			log.Fatal(err)
		}
	}

	// Coordinator: follow the results, each exactly once.
	cursor := ""
	for done := 0; done < len(inputs); {
		recs, err := c.Results(ctx, "run-1", cursor, 100, 5*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%d: %s\n", r.Index, r.Line)
			cursor = r.Cursor
			done++
		}
	}
}
