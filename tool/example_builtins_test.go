package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/batchagent/batchagent/tool"
)

func ExampleListDir() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	for name, content := range map[string]string{"README.md": "# demo\n", "src/main.go": "package main\n"} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Println(err)
			return
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			fmt.Println(err)
			return
		}
	}

	listDir, err := tool.ListDir(tool.ListDirConfig{Roots: []string{dir}, Cacheable: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer listDir.(io.Closer).Close() // closes the roots
	pool, err := tool.NewPool([]tool.Tool{listDir}, tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, args := range []string{`{}`, `{"path":"src"}`, `{"path":"../.."}`, `{"path":"README.md"}`} {
		result, err := pool.Call(ctx, "list_dir", json.RawMessage(args))
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s:\n%s\n", args, result)
	}
	// Output:
	// {}:
	// README.md  7 bytes
	// src/
	// {"path":"src"}:
	// main.go  13 bytes
	// tool list_dir: path "../..": path escapes the allowed roots
	// tool list_dir: path "README.md": not a directory
}

func ExampleHTTPGet() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"green"}`)
	}))
	defer srv.Close()

	// The test server listens on 127.0.0.1, a loopback address: only a test
	// needs AllowPrivate. A real configuration names public hosts, such as
	// "api.example.com" or "*.example.com".
	httpGet, err := tool.HTTPGet(tool.HTTPGetConfig{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := tool.NewPool([]tool.Tool{httpGet}, tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, u := range []string{srv.URL + "/health", "https://example.com/", "file:///etc/passwd"} {
		args, _ := json.Marshal(map[string]string{"url": u})
		result, err := pool.Call(ctx, "http_get", args)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(result)
	}
	// Output:
	// HTTP 200 OK
	// Content-Type: application/json
	//
	// {"status":"green"}
	// tool http_get: url "https://example.com/": host "example.com" is not allowed; allowed hosts: 127.0.0.1
	// tool http_get: url "file:///etc/passwd": scheme "file" is not allowed; only http and https URLs are
}
