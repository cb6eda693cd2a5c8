package httptool_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/tool/httptool"
)

// BenchmarkGet fetches a 4 KiB page from a local server, a new
// connection per call.
func BenchmarkGet(b *testing.B) {
	srv, _ := newServer(b, reply(http.StatusOK, "text/html", strings.Repeat("<p>lorem ipsum</p>\n", 215)))
	hg := newGet(b, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
	args := urlArgs(srv.URL)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hg.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetRefused measures a refusal by the host allowlist, which
// makes no connection.
func BenchmarkGetRefused(b *testing.B) {
	hg := newGet(b, httptool.Config{AllowHosts: []string{"api.example.com", "*.example.org"}})
	args := urlArgs("https://evil-example.org/path?q=1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hg.Call(b.Context(), args); err == nil {
			b.Fatal("http_get to a disallowed host succeeded")
		}
	}
}
