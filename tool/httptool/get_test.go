package httptool_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/httptool"
)

// newGet builds an http_get tool or fails the test.
func newGet(t testing.TB, cfg httptool.Config) tool.Tool {
	t.Helper()
	hg, err := httptool.Get(cfg)
	if err != nil {
		t.Fatalf("Get(%+v): %v", cfg, err)
	}
	return hg
}

// urlArgs returns the arguments {"url": u}.
func urlArgs(u string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"url": u})
	return b
}

// newServer starts a test server on 127.0.0.1 that counts the requests it
// serves in *hits.
func newServer(t testing.TB, h http.Handler) (srv *httptest.Server, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

// reply returns a handler that answers with a status, a content type (none
// when "-") and a body.
func reply(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType == "-" {
			w.Header()["Content-Type"] = nil // no sniffing by the server
		} else {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

// redirect returns a handler that redirects to location.
func redirect(location string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", location)
		w.WriteHeader(http.StatusFound)
	}
}

// newPool builds a Pool of tools or fails the test.
func newPool(t *testing.T, cfg tool.PoolConfig, tools ...tool.Tool) *tool.Pool {
	t.Helper()
	p, err := tool.NewPool(tools, cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	return p
}

func TestGet(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/text", reply(200, "text/plain; charset=utf-8", "hello"))
	mux.Handle("/json", reply(200, "application/json", `{"a":1}`))
	mux.Handle("/problem", reply(400, "application/problem+json", `{"title":"bad"}`))
	mux.Handle("/svg", reply(200, "image/svg+xml", "<svg/>"))
	mux.Handle("/missing", reply(404, "text/html", "<p>gone</p>"))
	mux.Handle("/error", reply(500, "text/plain", "boom"))
	mux.Handle("/odd-status", reply(299, "text/plain", "odd"))
	mux.Handle("/exact", reply(200, "text/plain", "0123456789abcdef"))
	mux.Handle("/big", reply(200, "text/plain", "0123456789abcdefXYZ"))
	mux.Handle("/utf8-cut", reply(200, "text/plain", strings.Repeat("a", 15)+"é"))
	mux.Handle("/png", reply(200, "image/png", "\x89PNG\r\n\x1a\n"))
	mux.Handle("/pdf", reply(200, "Application/PDF", "%PDF-1.4"))
	mux.Handle("/zip", reply(200, "application/zip", "PK\x03\x04"))
	mux.Handle("/bad-type", reply(200, "image/png;;", "x"))
	mux.Handle("/octet-text", reply(200, "application/octet-stream", "plain words"))
	mux.Handle("/octet-binary", reply(200, "application/octet-stream", "\x89PNG\r\n\x1a\n\x00\x00"))
	mux.Handle("/untyped-text", reply(200, "-", "just text"))
	mux.Handle("/untyped-binary", reply(200, "-", "GIF89a\x01\x00\x01\x00"))
	mux.Handle("/nul", reply(200, "text/plain", "a\x00b"))
	mux.Handle("/empty", reply(204, "-", ""))
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write([]byte(strings.Repeat("z", 1<<20))) // a 1 KiB bomb of 1 MiB
		zw.Close()
	})
	mux.HandleFunc("/agent", func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() != "batchagent-http_get" || r.Header.Get("Cookie") != "" || r.Header.Get("Authorization") != "" {
			fmt.Fprintf(w, "%q", r.Header)
			return
		}
		fmt.Fprint(w, "clean request")
	})
	mux.Handle("/redirect", redirect("/text"))
	mux.Handle("/redirect-twice", redirect("/redirect"))
	mux.Handle("/redirect-no-location", reply(302, "text/plain", "moved somewhere"))
	mux.Handle("/redirect-evil", redirect("http://evil.example.com/steal"))
	mux.Handle("/redirect-evil-port", redirect("http://127.0.0.1:1/x"))
	mux.Handle("/redirect-ftp", redirect("ftp://127.0.0.1/file"))
	mux.Handle("/redirect-file", redirect("file:///etc/passwd"))
	mux.Handle("/redirect-metadata", redirect("http://169.254.169.254/latest/meta-data/"))
	srv, _ := newServer(t, mux)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1:" + port}, AllowPrivate: true, MaxBytes: 16})

	tests := []struct {
		path    string
		want    string
		wantErr string
	}{
		{path: "/text", want: "HTTP 200 OK\nContent-Type: text/plain; charset=utf-8\n\nhello"},
		{path: "/json", want: "HTTP 200 OK\nContent-Type: application/json\n\n{\"a\":1}"},
		{path: "/problem", want: "HTTP 400 Bad Request\nContent-Type: application/problem+json\n\n{\"title\":\"bad\"}"},
		{path: "/svg", want: "HTTP 200 OK\nContent-Type: image/svg+xml\n\n<svg/>"},
		{path: "/missing", want: "HTTP 404 Not Found\nContent-Type: text/html\n\n<p>gone</p>"},
		{path: "/error", want: "HTTP 500 Internal Server Error\nContent-Type: text/plain\n\nboom"},
		{path: "/odd-status", want: "HTTP 299\nContent-Type: text/plain\n\nodd"},
		{path: "/exact", want: "HTTP 200 OK\nContent-Type: text/plain\n\n0123456789abcdef"},
		{path: "/big", want: "HTTP 200 OK\nContent-Type: text/plain\n\n0123456789abcdef\n[truncated at 16 bytes]"},
		{path: "/utf8-cut", want: "HTTP 200 OK\nContent-Type: text/plain\n\naaaaaaaaaaaaaaa\n[truncated at 16 bytes]"},
		{path: "/gzip", want: "HTTP 200 OK\nContent-Type: text/plain\n\nzzzzzzzzzzzzzzzz\n[truncated at 16 bytes]"},
		{path: "/octet-text", want: "HTTP 200 OK\nContent-Type: application/octet-stream\n\nplain words"},
		{path: "/untyped-text", want: "HTTP 200 OK\nContent-Type: (none)\n\njust text"},
		{path: "/empty", want: "HTTP 204 No Content\nContent-Type: (none)\n\n"},
		{path: "/agent", want: "HTTP 200 OK\nContent-Type: text/plain; charset=utf-8\n\nclean request"},
		{path: "/redirect", want: "HTTP 200 OK\nContent-Type: text/plain; charset=utf-8\n\nhello"},
		{path: "/redirect-twice", want: "HTTP 200 OK\nContent-Type: text/plain; charset=utf-8\n\nhello"},
		{path: "/redirect-no-location", want: "HTTP 302 Found\nContent-Type: text/plain\n\nmoved somewhere"},
		{path: "/png", wantErr: "binary content (image/png)"},
		{path: "/pdf", wantErr: "binary content (application/pdf)"},
		{path: "/zip", wantErr: "binary content (application/zip)"},
		{path: "/bad-type", wantErr: "binary content (image/png)"},
		{path: "/octet-binary", wantErr: "binary content (application/octet-stream)"},
		{path: "/untyped-binary", wantErr: "binary content (no Content-Type; the body looks like image/gif)"},
		{path: "/nul", wantErr: "binary content (text/plain with NUL bytes)"},
		{path: "/redirect-evil", wantErr: `redirected to "http://evil.example.com/steal": host "evil.example.com" is not allowed; allowed hosts: 127.0.0.1:` + port},
		{path: "/redirect-evil-port", wantErr: `redirected to "http://127.0.0.1:1/x": host "127.0.0.1:1" is not allowed; allowed hosts: 127.0.0.1:` + port},
		{path: "/redirect-ftp", wantErr: `redirected to "ftp://127.0.0.1/file": scheme "ftp" is not allowed; only http and https URLs are`},
		{path: "/redirect-file", wantErr: `redirected to "file:///etc/passwd": scheme "file" is not allowed; only http and https URLs are`},
		{path: "/redirect-metadata", wantErr: `redirected to "http://169.254.169.254/latest/meta-data/": host "169.254.169.254" is not allowed; allowed hosts: 127.0.0.1:` + port},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			u := srv.URL + tt.path
			got, err := hg.Call(t.Context(), urlArgs(u))
			if tt.wantErr != "" {
				want := fmt.Sprintf("url %q: %s", u, tt.wantErr)
				if err == nil || err.Error() != want {
					t.Fatalf("http_get(%s) = %q, %v, want error %q", u, got, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("http_get(%s) error = %v, want nil", u, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("http_get(%s) mismatch (-want +got):\n%s", u, diff)
			}
		})
	}
}

func TestGetDefaultMaxBytes(t *testing.T) {
	body := strings.Repeat("a", httptool.DefaultMaxBytes+10)
	srv, _ := newServer(t, reply(200, "text/plain", body))
	hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
	got, err := hg.Call(t.Context(), urlArgs(srv.URL))
	want := "HTTP 200 OK\nContent-Type: text/plain\n\n" + body[:httptool.DefaultMaxBytes] + "\n[truncated at 64512 bytes]"
	if err != nil || got != want {
		t.Errorf("http_get(%d bytes) = %d bytes ending %q, %v, want %d bytes ending %q", len(body), len(got), got[max(0, len(got)-40):], err, len(want), want[len(want)-40:])
	}
}

// TestGetCutsOnRuneBoundary cuts bodies inside a rune, including the
// first one, with limits smaller than a rune.
func TestGetCutsOnRuneBoundary(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		maxBytes int64
		want     string // the body as returned
	}{
		{name: "inside the first rune, 1 byte", body: "€uro", maxBytes: 1, want: ""},
		{name: "inside the first rune, 2 bytes", body: "€uro", maxBytes: 2, want: ""},
		{name: "after the first rune", body: "€uro", maxBytes: 3, want: "€"},
		{name: "inside a 4-byte first rune", body: "😀!", maxBytes: 3, want: ""},
		{name: "inside a later rune", body: "a😀b", maxBytes: 3, want: "a"},
		{name: "on a boundary", body: "ab€", maxBytes: 2, want: "ab"},
		{name: "not UTF-8", body: "\x80\x80\x80\x80\x80", maxBytes: 2, want: "\x80\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newServer(t, reply(200, "text/plain", tt.body))
			hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true, MaxBytes: tt.maxBytes})
			got, err := hg.Call(t.Context(), urlArgs(srv.URL))
			want := fmt.Sprintf("HTTP 200 OK\nContent-Type: text/plain\n\n%s\n[truncated at %d bytes]", tt.want, tt.maxBytes)
			if err != nil || got != want {
				t.Errorf("http_get(%q) with MaxBytes %d = %q, %v, want %q, nil", tt.body, tt.maxBytes, got, err, want)
			}
		})
	}
}

// TestGetDefaultMaxBytesFitsPool checks that a Pool with the default
// MaxResultBytes returns a body cut at the default MaxBytes as http_get made
// it, with http_get's own marker, and does not cut it again.
func TestGetDefaultMaxBytesFitsPool(t *testing.T) {
	body := strings.Repeat("é", httptool.DefaultMaxBytes) // 2 bytes a rune
	srv, _ := newServer(t, reply(200, "application/vnd.example.report+json; charset=utf-8; profile=\"https://example.com/schemas/report\"", body))
	hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
	want, err := hg.Call(t.Context(), urlArgs(srv.URL))
	if err != nil || !strings.HasSuffix(want, fmt.Sprintf("\n[truncated at %d bytes]", httptool.DefaultMaxBytes)) {
		t.Fatalf("http_get(%d bytes) = %d bytes ending %q, %v, want a body cut at the default MaxBytes", len(body), len(want), want[max(0, len(want)-40):], err)
	}
	p, err := tool.NewPool([]tool.Tool{hg}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Call(t.Context(), "http_get", urlArgs(srv.URL))
	if err != nil || got != want {
		t.Errorf("Pool.Call(http_get, %d bytes) = %d bytes ending %q, %v, want the tool's %d bytes ending %q",
			len(body), len(got), got[max(0, len(got)-40):], err, len(want), want[len(want)-40:])
	}
}

func TestGetRedirectLimit(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/r/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			fmt.Fprint(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n-1), http.StatusMovedPermanently)
	})
	mux.Handle("/loop", redirect("/loop"))
	srv, _ := newServer(t, mux)
	const arrived = "HTTP 200 OK\nContent-Type: text/plain; charset=utf-8\n\narrived"
	tests := []struct {
		name         string
		maxRedirects int
		path         string
		wantErr      string
	}{
		{name: "default, within", maxRedirects: 0, path: "/r/5"},
		{name: "default, over", maxRedirects: 0, path: "/r/6", wantErr: `stopped after 5 redirects: the next was to "` + srv.URL + `/r/0"`},
		{name: "default, loop", maxRedirects: 0, path: "/loop", wantErr: `stopped after 5 redirects: the next was to "` + srv.URL + `/loop"`},
		{name: "3, within", maxRedirects: 3, path: "/r/3"},
		{name: "3, over", maxRedirects: 3, path: "/r/4", wantErr: `stopped after 3 redirects: the next was to "` + srv.URL + `/r/0"`},
		{name: "1, over", maxRedirects: 1, path: "/r/2", wantErr: `stopped after 1 redirects: the next was to "` + srv.URL + `/r/0"`},
		{name: "none, no redirect", maxRedirects: -1, path: "/r/0"},
		{name: "none, one redirect", maxRedirects: -1, path: "/r/1", wantErr: `redirected to "` + srv.URL + `/r/0": redirects are not followed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true, MaxRedirects: tt.maxRedirects})
			u := srv.URL + tt.path
			got, err := hg.Call(t.Context(), urlArgs(u))
			if tt.wantErr != "" {
				want := fmt.Sprintf("url %q: %s", u, tt.wantErr)
				if err == nil || err.Error() != want {
					t.Fatalf("http_get(%s) = %q, %v, want error %q", u, got, err, want)
				}
				return
			}
			if err != nil || got != arrived {
				t.Fatalf("http_get(%s) = %q, %v, want %q, nil", u, got, err, arrived)
			}
		})
	}
}

// Every URL here is refused before any connection is made: none of these
// tests touches the network.
func TestGetRefusedURLs(t *testing.T) {
	hg := newGet(t, httptool.Config{AllowHosts: []string{"api.example.com", "*.example.org"}})
	const allowed = "allowed hosts: api.example.com, *.example.org"
	tests := []struct {
		url, want string
	}{
		{url: "http://evil.com/", want: `host "evil.com" is not allowed; ` + allowed},
		{url: "https://evil-example.org/", want: `host "evil-example.org" is not allowed; ` + allowed},
		{url: "https://example.org/", want: `host "example.org" is not allowed; ` + allowed},
		{url: "https://example.org.evil.com/", want: `host "example.org.evil.com" is not allowed; ` + allowed},
		{url: "https://api.example.com.evil.com/", want: `host "api.example.com.evil.com" is not allowed; ` + allowed},
		{url: "https://notapi.example.com/", want: `host "notapi.example.com" is not allowed; ` + allowed},
		{url: "http://127.0.0.1/", want: `host "127.0.0.1" is not allowed; ` + allowed},
		{url: "http://[::1]/", want: `host "[::1]" is not allowed; ` + allowed},
		{url: "http://api.example.com@evil.com/", want: `URLs with user information (user:password@) are not allowed`},
		{url: "http://user:pw@api.example.com/", want: `URLs with user information (user:password@) are not allowed`},
		{url: "http://xn--pi-7ld.example.com.evil/", want: `host "xn--pi-7ld.example.com.evil" is not allowed; ` + allowed},
		{url: "http://аpi.example.com/", want: `host "аpi.example.com" is not ASCII; write international domain names in their xn-- form`},
		{url: "file:///etc/passwd", want: `scheme "file" is not allowed; only http and https URLs are`},
		{url: "ftp://api.example.com/x", want: `scheme "ftp" is not allowed; only http and https URLs are`},
		{url: "gopher://api.example.com/", want: `scheme "gopher" is not allowed; only http and https URLs are`},
		{url: "javascript:alert(1)", want: `scheme "javascript" is not allowed; only http and https URLs are`},
		{url: "api.example.com/x", want: `not an absolute URL; give a full http or https URL, for example "https://example.com/"`},
		{url: "//api.example.com/x", want: `not an absolute URL; give a full http or https URL, for example "https://example.com/"`},
		{url: "/etc/passwd", want: `not an absolute URL; give a full http or https URL, for example "https://example.com/"`},
		{url: "http:///x", want: `the URL has no host`},
		{url: "http://:80/x", want: `the URL has no host`},
		{url: "http:api.example.com", want: `the URL has no host`},
		{url: "http://api.example.com:port/", want: `invalid port ":port" after host`},
		{url: "http://%zz/", want: `invalid URL escape "%zz"`},
		{url: "http://api.example.com/\x7f", want: `net/url: invalid control character in URL`},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			got, err := hg.Call(t.Context(), urlArgs(tt.url))
			want := fmt.Sprintf("url %q: %s", tt.url, tt.want)
			if err == nil || err.Error() != want {
				t.Errorf("http_get(%s) = %q, %v, want error %q", tt.url, got, err, want)
			}
		})
	}
}

func TestGetZeroConfigAllowsNothing(t *testing.T) {
	srv, hits := newServer(t, reply(200, "text/plain", "x"))
	hg := newGet(t, httptool.Config{})
	for _, u := range []string{"https://example.com/", srv.URL} {
		host := strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
		host = strings.TrimSuffix(host, "/")
		want := fmt.Sprintf("url %q: host %q is not allowed: no host is allowed", u, host)
		if got, err := hg.Call(t.Context(), urlArgs(u)); err == nil || err.Error() != want {
			t.Errorf("http_get(%s) = %q, %v, want error %q", u, got, err, want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
	if spec := hg.Spec(); !strings.Contains(spec.Description, "No host is allowed at present") {
		t.Errorf("Spec().Description = %q, want it to say that no host is allowed", spec.Description)
	}
}

// Without AllowPrivate, loopback and other internal addresses are refused,
// whether written in the URL or reached by resolving an allowed name, and
// the server is never contacted.
func TestGetRefusedAddresses(t *testing.T) {
	srv, hits := newServer(t, reply(200, "text/plain", "internal secret"))
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	const note = "; loopback, private and link-local addresses are refused"
	tests := []struct {
		name  string
		allow string
		url   string
		want  string // the error's text after `url "URL": `
	}{
		{name: "IPv4 loopback", allow: "127.0.0.1", url: srv.URL + "/", want: "127.0.0.1 is a loopback address" + note},
		{name: "other IPv4 loopback", allow: "127.1.2.3", url: "http://127.1.2.3:" + port + "/", want: "127.1.2.3 is a loopback address" + note},
		{name: "IPv6 loopback", allow: "::1", url: "http://[::1]:" + port + "/", want: "::1 is a loopback address" + note},
		{name: "IPv4-mapped loopback", allow: "[::ffff:127.0.0.1]", url: "http://[::ffff:127.0.0.1]:" + port + "/", want: "127.0.0.1 is a loopback address" + note},
		{name: "metadata address", allow: "169.254.169.254", url: "http://169.254.169.254/latest/meta-data/", want: "169.254.169.254 is a link-local address" + note},
		{name: "IPv6 link-local", allow: "fe80::1", url: "http://[fe80::1]/", want: "fe80::1 is a link-local address" + note},
		{name: "RFC 1918", allow: "10.0.0.1", url: "http://10.0.0.1/", want: "10.0.0.1 is a private address" + note},
		{name: "unique local", allow: "fd00::1", url: "http://[fd00::1]/", want: "fd00::1 is a private address" + note},
		{name: "CGNAT", allow: "100.64.0.1", url: "http://100.64.0.1/", want: "100.64.0.1 is a shared (CGNAT) address" + note},
		{name: "unspecified", allow: "0.0.0.0", url: "http://0.0.0.0:" + port + "/", want: "0.0.0.0 is an unspecified address" + note},
		{name: "NAT64 of loopback", allow: "64:ff9b::7f00:1", url: "http://[64:ff9b::7f00:1]/", want: "64:ff9b::7f00:1 is a loopback address" + note},
		// localhost resolves to 127.0.0.1 (and maybe ::1): the dialer refuses the address.
		{name: "name resolving to loopback", allow: "localhost", url: "http://localhost:" + port + "/", want: `host "localhost" resolves to `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hg := newGet(t, httptool.Config{AllowHosts: []string{tt.allow}})
			got, err := hg.Call(t.Context(), urlArgs(tt.url))
			prefix := fmt.Sprintf("url %q: ", tt.url)
			if err == nil || !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("http_get(%s) = %q, %v, want an error starting %q", tt.url, got, err, prefix)
			}
			text := strings.TrimPrefix(err.Error(), prefix)
			if rest, ok := strings.CutPrefix(tt.want, `host "localhost" resolves to `); ok && rest == "" {
				// The address tried first depends on the resolver.
				if text != `host "localhost" resolves to 127.0.0.1, a loopback address`+note &&
					text != `host "localhost" resolves to ::1, a loopback address`+note {
					t.Fatalf("http_get(%s) error = %q, want localhost's loopback address refused", tt.url, err)
				}
				return
			}
			if text != tt.want {
				t.Fatalf("http_get(%s) error = %q, want %q", tt.url, err, prefix+tt.want)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
}

func TestRefusedAddressKind(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{addr: "8.8.8.8", want: ""},
		{addr: "203.0.113.7", want: ""},
		{addr: "2606:4700::1111", want: ""},
		{addr: "64:ff9b::808:808", want: ""}, // NAT64 of 8.8.8.8
		{addr: "100.63.255.255", want: ""},
		{addr: "100.128.0.0", want: ""},
		{addr: "172.32.0.1", want: ""},
		{addr: "127.0.0.1", want: "loopback"},
		{addr: "127.255.255.254", want: "loopback"},
		{addr: "::1", want: "loopback"},
		{addr: "::ffff:127.0.0.1", want: "loopback"},
		{addr: "64:ff9b::7f00:1", want: "loopback"},
		{addr: "10.1.2.3", want: "private"},
		{addr: "172.16.0.1", want: "private"},
		{addr: "172.31.255.255", want: "private"},
		{addr: "192.168.1.1", want: "private"},
		{addr: "::ffff:192.168.1.1", want: "private"},
		{addr: "fc00::1", want: "private"},
		{addr: "fdff::1", want: "private"},
		{addr: "fec0::1", want: "private"},
		{addr: "64:ff9b:1::1", want: "private"},
		{addr: "64:ff9b::a00:1", want: "private"}, // NAT64 of 10.0.0.1
		{addr: "169.254.169.254", want: "link-local"},
		{addr: "169.254.0.1", want: "link-local"},
		{addr: "64:ff9b::a9fe:a9fe", want: "link-local"}, // NAT64 of 169.254.169.254
		{addr: "fe80::1", want: "link-local"},
		{addr: "fe80::1%eth0", want: "link-local"},
		{addr: "ff02::1", want: "link-local"},
		{addr: "224.0.0.1", want: "link-local"},
		{addr: "0.0.0.0", want: "unspecified"},
		{addr: "0.1.2.3", want: "unspecified"},
		{addr: "::", want: "unspecified"},
		{addr: "100.64.0.1", want: "shared (CGNAT)"},
		{addr: "100.127.255.255", want: "shared (CGNAT)"},
		{addr: "239.1.1.1", want: "multicast"},
		{addr: "ff0e::1", want: "multicast"},
		{addr: "255.255.255.255", want: "reserved"},
		{addr: "240.0.0.1", want: "reserved"},
		{addr: "::7f00:1", want: "reserved"}, // IPv4-compatible
	}
	for _, tt := range tests {
		if got := httptool.RefusedAddressKind(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("refusedAddressKind(%s) = %q, want %q", tt.addr, got, tt.want)
		}
	}
	if got := httptool.RefusedAddressKind(netip.Addr{}); got != "invalid" {
		t.Errorf("refusedAddressKind(zero Addr) = %q, want %q", got, "invalid")
	}
}

// TestGetHostPatterns checks host matching without connecting anywhere.
func TestGetHostPatterns(t *testing.T) {
	hosts := []string{"api.example.com", "*.example.org", "Mixed.Case.COM", "example.net:8080", "[2001:db8::1]",
		"[2001:db8::2]:8443", "203.0.113.7", "trailing.dot.", "*.Wild.Example:9000"}
	tests := []struct {
		url  string
		want bool
	}{
		{url: "http://api.example.com/", want: true},
		{url: "https://API.EXAMPLE.COM./x?q=1#f", want: true},
		{url: "http://api.example.com:1234/", want: true},
		{url: "http://a.example.org/", want: true},
		{url: "http://a.b.example.org/", want: true},
		{url: "http://example.org/", want: false},
		{url: "http://evil-example.org/", want: false},
		{url: "http://aexample.org/", want: false},
		{url: "http://example.org.evil.com/", want: false},
		{url: "http://a.example.org.evil.com/", want: false},
		{url: "http://mixed.case.com/", want: true},
		{url: "http://example.net:8080/", want: true},
		{url: "https://example.net:8080/", want: true},
		{url: "http://example.net/", want: false},
		{url: "http://example.net:80/", want: false},
		{url: "http://[2001:db8::1]/", want: true},
		{url: "http://[2001:db8:0::1]:81/", want: true},
		{url: "https://[2001:db8::2]:8443/", want: true},
		{url: "https://[2001:db8::2]/", want: false},
		{url: "http://203.0.113.7/", want: true},
		{url: "http://[::ffff:203.0.113.7]/", want: true},
		{url: "http://203.0.113.8/", want: false},
		{url: "http://203.0.113.7./", want: false}, // a name, not the address
		{url: "http://trailing.dot/", want: true},
		{url: "http://x.wild.example:9000/", want: true},
		{url: "http://x.wild.example/", want: false},
		{url: "https://x.wild.example:443/", want: false},
	}
	cfg := httptool.Config{AllowHosts: hosts}
	for _, tt := range tests {
		err := httptool.CheckURL(cfg, tt.url)
		if got := err == nil; got != tt.want {
			t.Errorf("checkURL(%s) = %v, want allowed %v", tt.url, err, tt.want)
		}
	}
	// Allowed private addresses still need AllowPrivate.
	for _, allowPrivate := range []bool{false, true} {
		cfg := httptool.Config{AllowHosts: []string{"10.1.2.3"}, AllowPrivate: allowPrivate}
		err := httptool.CheckURL(cfg, "http://10.1.2.3/")
		if got := err == nil; got != allowPrivate {
			t.Errorf("checkURL(http://10.1.2.3/) with AllowPrivate %v = %v, want allowed %v", allowPrivate, err, allowPrivate)
		}
	}
}

func TestGetTimeout(t *testing.T) {
	started := make(chan struct{}, 2) // one per request that reaches the server
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done() // until the client goes away
	}))
	t.Run("Timeout", func(t *testing.T) {
		hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true, Timeout: 50 * time.Millisecond})
		got, err := hg.Call(t.Context(), urlArgs(srv.URL))
		want := fmt.Sprintf("url %q: timed out after 50ms", srv.URL)
		if err == nil || err.Error() != want {
			t.Errorf("http_get(%s) = %q, %v, want error %q", srv.URL, got, err, want)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-started
			cancel()
		}()
		got, err := hg.Call(ctx, urlArgs(srv.URL))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("http_get(%s) with the context cancelled = %q, %v, want an error wrapping context.Canceled", srv.URL, got, err)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if got, err := hg.Call(ctx, urlArgs(srv.URL)); !errors.Is(err, context.Canceled) {
			t.Errorf("http_get(%s) with a cancelled context = %q, %v, want context.Canceled", srv.URL, got, err)
		}
	})
}

func TestGetArguments(t *testing.T) {
	hg := newGet(t, httptool.Config{AllowHosts: []string{"example.com"}})
	tests := []struct {
		name, args, want string
		bad              bool // wraps ErrBadArguments
	}{
		{name: "missing url", args: `{}`, bad: true, want: `tool: bad arguments: missing required argument "url"`},
		{name: "null url", args: `{"url":null}`, bad: true, want: `tool: bad arguments: missing required argument "url"`},
		{name: "url not a string", args: `{"url":1}`, bad: true, want: `tool: bad arguments: json: cannot unmarshal number into Go struct field .url of type string; want {"url": "<http or https URL>"}`},
		{name: "unknown argument", args: `{"url":"https://example.com/","method":"POST"}`, bad: true, want: `tool: bad arguments: json: unknown field "method"; want {"url": "<http or https URL>"}`},
		{name: "not an object", args: `"https://example.com/"`, bad: true, want: `tool: bad arguments: json: cannot unmarshal string into Go value of type struct { URL *string "json:\"url\"" }; want {"url": "<http or https URL>"}`},
		{name: "empty url", args: `{"url":""}`, want: `url is empty; give an absolute http or https URL, for example "https://example.com/"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := hg.Call(t.Context(), json.RawMessage(tt.args))
			if err == nil || err.Error() != tt.want || errors.Is(err, tool.ErrBadArguments) != tt.bad {
				t.Errorf("http_get(%s) error = %v, want %q (wrapping ErrBadArguments: %v)", tt.args, err, tt.want, tt.bad)
			}
		})
	}
}

func TestGetThroughPool(t *testing.T) {
	srv, hits := newServer(t, reply(200, "text/plain", "page"))
	hg := newGet(t, httptool.Config{AllowHosts: []string{"127.0.0.1"}, AllowPrivate: true, Cacheable: true})
	p := newPool(t, tool.PoolConfig{}, hg)
	want := "HTTP 200 OK\nContent-Type: text/plain\n\npage"
	for range 3 {
		if got, err := p.Call(t.Context(), "http_get", urlArgs(srv.URL)); got != want || err != nil {
			t.Fatalf("Call(http_get, %s) = %q, %v, want %q, nil", srv.URL, got, err, want)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("server got %d requests, want 1 (the rest from the cache)", n)
	}
	wantErr := `tool http_get: url "http://169.254.169.254/": host "169.254.169.254" is not allowed; allowed hosts: 127.0.0.1`
	if _, err := p.Call(t.Context(), "http_get", urlArgs("http://169.254.169.254/")); err == nil || err.Error() != wantErr {
		t.Errorf("Call(http_get, metadata) error = %v, want %q", err, wantErr)
	}
}

func TestGetSpec(t *testing.T) {
	for _, cacheable := range []bool{false, true} {
		hg := newGet(t, httptool.Config{AllowHosts: []string{"a.example", "*.b.example"}, Cacheable: cacheable})
		spec := hg.Spec()
		if spec.Name != "http_get" || spec.Cacheable != cacheable ||
			!strings.Contains(spec.Description, "Only these hosts are allowed: a.example, *.b.example.") ||
			!strings.Contains(spec.Description, "over 64512 bytes are cut") {
			t.Errorf("Spec() = {Name: %q, Cacheable: %v, Description: %q}, want http_get, %v and a description naming the hosts and the limit",
				spec.Name, spec.Cacheable, spec.Description, cacheable)
		}
		var got map[string]any
		if err := json.Unmarshal(spec.Parameters, &got); err != nil {
			t.Fatalf("Spec().Parameters = %s: %v", spec.Parameters, err)
		}
		u := got["properties"].(map[string]any)["url"].(map[string]any)
		if u["description"] == "" {
			t.Error("Spec().Parameters: url has no description")
		}
		delete(u, "description")
		want := map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"url": map[string]any{"type": "string"}},
			"required":             []any{"url"},
			"additionalProperties": false,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Spec().Parameters mismatch (-want +got):\n%s", diff)
		}
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example", i)
	}
	want := "h0.example, h1.example, h2.example, h3.example, h4.example, h5.example, h6.example, h7.example, h8.example, h9.example and 2 more"
	if d := newGet(t, httptool.Config{AllowHosts: many}).Spec().Description; !strings.Contains(d, want) {
		t.Errorf("Spec().Description = %q, want it to contain %q", d, want)
	}
}

func TestGetConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  httptool.Config
		want string
	}{
		{name: "negative MaxBytes", cfg: httptool.Config{MaxBytes: -1}, want: "tool: http_get: negative MaxBytes -1"},
		{name: "negative Timeout", cfg: httptool.Config{Timeout: -time.Second}, want: "tool: http_get: negative Timeout -1s"},
		{name: "empty host", cfg: httptool.Config{AllowHosts: []string{"ok.example", ""}}, want: `tool: http_get: AllowHosts[1] "": empty host`},
		{name: "URL", cfg: httptool.Config{AllowHosts: []string{"https://example.com"}}, want: `tool: http_get: AllowHosts[0] "https://example.com": want a host such as "example.com" or "*.example.com", optionally with a port, not a URL`},
		{name: "path", cfg: httptool.Config{AllowHosts: []string{"example.com/api"}}, want: `tool: http_get: AllowHosts[0] "example.com/api": want a host such as "example.com" or "*.example.com", optionally with a port, not a URL`},
		{name: "bare wildcard", cfg: httptool.Config{AllowHosts: []string{"*"}}, want: `tool: http_get: AllowHosts[0] "*": a wildcard needs a domain after it, as in "*.example.com"`},
		{name: "empty wildcard", cfg: httptool.Config{AllowHosts: []string{"*."}}, want: `tool: http_get: AllowHosts[0] "*.": a wildcard needs a domain after it, as in "*.example.com"`},
		{name: "inner wildcard", cfg: httptool.Config{AllowHosts: []string{"api.*.example.com"}}, want: `tool: http_get: AllowHosts[0] "api.*.example.com": not a valid host name`},
		{name: "partial wildcard", cfg: httptool.Config{AllowHosts: []string{"*example.com"}}, want: `tool: http_get: AllowHosts[0] "*example.com": not a valid host name`},
		{name: "empty label", cfg: httptool.Config{AllowHosts: []string{"a..example.com"}}, want: `tool: http_get: AllowHosts[0] "a..example.com": not a valid host name`},
		{name: "space", cfg: httptool.Config{AllowHosts: []string{"a example.com"}}, want: `tool: http_get: AllowHosts[0] "a example.com": want a host such as "example.com" or "*.example.com", optionally with a port, not a URL`},
		{name: "non-ASCII", cfg: httptool.Config{AllowHosts: []string{"bücher.example"}}, want: `tool: http_get: AllowHosts[0] "bücher.example": not a valid host name`},
		{name: "port zero", cfg: httptool.Config{AllowHosts: []string{"example.com:0"}}, want: `tool: http_get: AllowHosts[0] "example.com:0": bad port "0"`},
		{name: "port name", cfg: httptool.Config{AllowHosts: []string{"example.com:http"}}, want: `tool: http_get: AllowHosts[0] "example.com:http": bad port "http"`},
		{name: "port too big", cfg: httptool.Config{AllowHosts: []string{"example.com:65536"}}, want: `tool: http_get: AllowHosts[0] "example.com:65536": bad port "65536"`},
		{name: "signed port", cfg: httptool.Config{AllowHosts: []string{"example.com:+80"}}, want: `tool: http_get: AllowHosts[0] "example.com:+80": bad port "+80"`},
		{name: "empty port", cfg: httptool.Config{AllowHosts: []string{"example.com:"}}, want: `tool: http_get: AllowHosts[0] "example.com:": bad port ""`},
		{name: "unclosed bracket", cfg: httptool.Config{AllowHosts: []string{"[::1"}}, want: `tool: http_get: AllowHosts[0] "[::1": unclosed [`},
		{name: "name in brackets", cfg: httptool.Config{AllowHosts: []string{"[example.com]"}}, want: `tool: http_get: AllowHosts[0] "[example.com]": only IPv6 addresses go in brackets`},
		{name: "zone", cfg: httptool.Config{AllowHosts: []string{"fe80::1%eth0"}}, want: `tool: http_get: AllowHosts[0] "fe80::1%eth0": IPv6 zones are not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hg, err := httptool.Get(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Get(%+v) = %v, %v, want error %q", tt.cfg, hg, err, tt.want)
			}
		})
	}
}

// FuzzGetURL calls http_get with arbitrary URLs while only loopback
// hosts are allowed and AllowPrivate is off: every call must fail cleanly,
// without reaching the test server and without touching the network (no
// allowed name needs DNS).
func FuzzGetURL(f *testing.F) {
	srv, hits := newServer(f, reply(200, "text/plain", "secret"))
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	hg := newGet(f, httptool.Config{
		AllowHosts: []string{"127.0.0.1", "localhost", "[::1]", "0.0.0.0", "169.254.169.254"},
		Timeout:    5 * time.Second,
	})
	for _, seed := range []string{
		srv.URL, "http://localhost:" + port + "/", "http://LOCALHOST.:" + port, "http://[::1]:" + port,
		"http://[::ffff:7f00:1]:" + port, "http://0.0.0.0:" + port, "http://0x7f000001:" + port, "http://2130706433:" + port,
		"http://127.1:" + port, "http://169.254.169.254/", "http://localhost@evil.com/", "file:///etc/passwd",
		"http://%6c%6fcalhost:" + port, "http://[fe80::1%25lo]:" + port, "", "http://", "::", "https://evil.com/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, u string) {
		got, err := hg.Call(t.Context(), urlArgs(u))
		if err == nil || got != "" {
			t.Fatalf("http_get(%q) = %q, %v, want a refusal", u, got, err)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("http_get(%q) reached the server", u)
		}
	})
}
