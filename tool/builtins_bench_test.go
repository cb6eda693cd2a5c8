package tool_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/tool"
)

// BenchmarkListDir lists a directory of 200 files.
func BenchmarkListDir(b *testing.B) {
	root := b.TempDir()
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("file%03d.go", i)), []byte("package x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ld, err := tool.ListDir(tool.ListDirConfig{Roots: []string{root}})
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ld.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPGet fetches a 4 KiB page from a local server, a new
// connection per call.
func BenchmarkHTTPGet(b *testing.B) {
	srv, _ := newServer(b, reply(http.StatusOK, "text/html", strings.Repeat("<p>lorem ipsum</p>\n", 215)))
	hg := newHTTPGet(b, tool.HTTPGetConfig{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
	args := urlArgs(srv.URL)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hg.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPGetRefused measures a refusal by the host allowlist, which
// makes no connection.
func BenchmarkHTTPGetRefused(b *testing.B) {
	hg := newHTTPGet(b, tool.HTTPGetConfig{AllowHosts: []string{"api.example.com", "*.example.org"}})
	args := urlArgs("https://evil-example.org/path?q=1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hg.Call(b.Context(), args); err == nil {
			b.Fatal("http_get to a disallowed host succeeded")
		}
	}
}
