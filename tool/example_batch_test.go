package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/batchagent/batchagent/tool"
)

func ExampleBatchFunc() {
	prices := map[string]string{"apple": "1.20", "pear": "0.90", "plum": "2.10"}
	// One query answers many keys; each caller gets its own result.
	lookup := tool.BatchFunc(tool.Spec{
		Name:        "price",
		Description: "Look up the price of a fruit.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"fruit":{"type":"string"}},"required":["fruit"]}`),
	}, func(ctx context.Context, args []json.RawMessage) []tool.Result {
		results := make([]tool.Result, len(args))
		for i, a := range args {
			var q struct{ Fruit string }
			if err := json.Unmarshal(a, &q); err != nil {
				results[i].Err = err
				continue
			}
			price, ok := prices[q.Fruit]
			if !ok {
				results[i].Err = fmt.Errorf("no price for %q", q.Fruit)
				continue
			}
			results[i].Content = price
		}
		return results
	})
	pool, err := tool.NewPool([]tool.Tool{lookup}, tool.PoolConfig{Policies: map[string]tool.Policy{
		// A batch runs once it has 3 calls, or 1s after its first call.
		"price": {BatchWindow: time.Second, BatchMax: 3, Rate: 10, MaxConcurrent: 2},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}

	fruits := []string{"apple", "kiwi", "plum"}
	results := make([]string, len(fruits))
	var wg sync.WaitGroup
	for i, fruit := range fruits {
		wg.Go(func() {
			res, err := pool.Call(context.Background(), "price", json.RawMessage(`{"fruit":"`+fruit+`"}`))
			results[i] = fmt.Sprintf("%s: %q %v", fruit, res, err)
		})
	}
	wg.Wait()
	for _, r := range results {
		fmt.Println(r)
	}
	s := pool.Stats()[0]
	fmt.Printf("requested %d, executed %d, batches %d\n", s.Requested, s.Executed, s.Batches)
	// Output:
	// apple: "1.20" <nil>
	// kiwi: "" tool price: no price for "kiwi"
	// plum: "2.10" <nil>
	// requested 3, executed 1, batches 1
}
