// Command scaleout-library spreads a run over Redis as a library user's
// program, with no batchagent binary: it runs a queue.Worker in its own
// process (start more copies with -worker-only, on any host) and a
// queue.Coordinator that enqueues the inputs within a window and collects
// each result once, here into stdout. Agents run on the in-process
// simulator.
//
//	go run ./examples/scaleout-library -redis redis://127.0.0.1:6379 -n 50
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/queue"
)

func main() {
	url := flag.String("redis", "", "URL of the Redis that holds the run: redis://[:password@]host:port[/db]")
	n := flag.Int("n", 50, "number of inputs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scaleout-library:", err)
		os.Exit(1)
	}
}

// openJob is the worker's Open: every run's inputs are described by an
// agent on the simulator. A real program would parse run.Job, the job as
// the coordinator registered it, and open its backend and tools.
func openJob(_ context.Context, run queue.RunStatus) (queue.Job, error) {
	model, err := sim.New(sim.Config{Latency: 20 * time.Millisecond, Seed: 1})
	if err != nil {
		return queue.Job{}, err
	}
	spec, err := batchagent.NewSpec(batchagent.Def{ID: run.ID, Model: model, Task: "Describe city {city}."})
	if err != nil {
		return queue.Job{}, err
	}
	return queue.Job{Config: batchagent.Config{}, Spec: spec}, nil
}

// run coordinates n inputs through the Redis at url, with one worker in
// this process, and writes each result line to out; it prints how many
// succeeded.
func run(ctx context.Context, url string, n int, out io.Writer) error {
	if url == "" || n < 1 {
		return errors.New("want -redis URL and -n 1 or more")
	}
	q, err := queue.Open(ctx, url, queue.Options{})
	if err != nil {
		return err
	}
	defer q.Close()

	w, err := queue.NewWorker(queue.WorkerConfig{Client: q, ID: "in-process", MaxActive: 16, Open: openJob})
	if err != nil {
		return err
	}
	workerCtx, stopWorker := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWorker()
	wg.Go(func() { _ = w.Run(workerCtx) }) // Run blocks until stopWorker

	inputs := make([]batchagent.Input, n)
	for i := range inputs {
		inputs[i] = batchagent.Input{"city": fmt.Sprintf("city-%d", i)}
	}
	c, err := queue.NewCoordinator(queue.CoordinatorConfig{
		Client: q,
		Run:    queue.Run{ID: fmt.Sprintf("example-%d", time.Now().UnixNano()), Job: []byte("task: Describe city {city}.\n")},
		Window: 10,
		Inputs: func() (batchagent.Inputs, error) { return batchagent.Slice(inputs), nil },
		Sink: func(batch []queue.Collected) error {
			for _, r := range batch {
				if _, err := fmt.Fprintf(out, "%s\n", r.Line); err != nil {
					return err
				}
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	if err := c.Run(ctx); err != nil { // blocks until every input has its result
		return err
	}
	st := c.Stats()
	summary, _ := json.Marshal(map[string]int{"inputs": n, "written": st.Written, "ok": st.OK, "failed": st.Failed})
	fmt.Fprintf(out, "%s\n", summary)
	if st.OK != n {
		return fmt.Errorf("%d of %d inputs failed", n-st.OK, n)
	}
	return nil
}
