package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/tool"
)

func ExamplePool() {
	upper := tool.Func(tool.Spec{
		Name:        "upper",
		Description: "Upper-case a text.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Cacheable:   true,
	}, func(ctx context.Context, args json.RawMessage) (string, error) {
		var a struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return "", err
		}
		return strings.ToUpper(a.Text), nil
	})
	pool, err := tool.NewPool([]tool.Tool{upper}, tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	// The second call differs only in whitespace: it is answered from the cache.
	for _, args := range []string{`{"text":"hello"}`, `{ "text": "hello" }`, `{"text":"bye"}`} {
		result, err := pool.Call(ctx, "upper", json.RawMessage(args))
		fmt.Println(result, err)
	}
	_, err = pool.Call(ctx, "lower", json.RawMessage(`{}`))
	fmt.Println(err)
	fmt.Printf("%+v\n", pool.Stats())
	// Output:
	// HELLO <nil>
	// HELLO <nil>
	// BYE <nil>
	// tool lower: tool: unknown tool "lower"; available tools: upper
	// [{Name:upper Requested:3 Executed:2 Coalesced:0 CacheHits:1 SharedHits:0 Errors:0 Batches:0}]
}
