package filetool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
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

	listDir, err := filetool.ListDir(filetool.ListDirConfig{Roots: []string{dir}, Cacheable: true})
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

	readFile, err := filetool.ReadFile(filetool.ReadFileConfig{Roots: []string{dir}, Cacheable: true})
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
