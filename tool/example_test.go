package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// [{Name:upper Requested:3 Executed:2 Coalesced:0 CacheHits:1 Errors:0 Batches:0}]
}

func ExampleReadFile() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk"), 0o644); err != nil {
		fmt.Println(err)
		return
	}

	readFile, err := tool.ReadFile(tool.ReadFileConfig{Roots: []string{dir}, Cacheable: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer readFile.(io.Closer).Close() // closes the roots
	pool, err := tool.NewPool([]tool.Tool{readFile}, tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, args := range []string{`{"path":"notes.txt"}`, `{"path":"../etc/passwd"}`, `{"path":"todo.txt"}`} {
		result, err := pool.Call(ctx, "read_file", json.RawMessage(args))
		fmt.Printf("%q %v\n", result, err)
	}
	// Output:
	// "buy milk" <nil>
	// "" tool read_file: path "../etc/passwd": path escapes the allowed roots
	// "" tool read_file: path "todo.txt": file does not exist
}
