package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// serveOn serves a gateway over cfg (one key, the simulator as "sim") on
// a loopback listener through Server.Serve, and returns its address.
func serveOn(t *testing.T, cfg server.Config) string {
	t.Helper()
	e, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	cfg.Backends = map[string]batchagent.Backend{"sim": {Model: newSim(t, sim.Config{Seed: 1}), Name: "sim"}}
	cfg.Keys = []server.Key{{Name: "test", SHA256: server.HashKey(testKey)}}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1) // Serve's result
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(fds)
}

// closedBy reads c until the server closes it and returns what it read
// and when the close came; it fails t if it did not come by deadline.
func closedBy(t *testing.T, c net.Conn, deadline time.Time) (string, time.Time) {
	t.Helper()
	_ = c.SetReadDeadline(deadline)
	b, err := io.ReadAll(c)
	// A reset is the server's close too: bytes a client sends after it
	// (a trickled body) reset the connection.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%s: not closed by the server by %v: %v (read %q)", c.LocalAddr(), deadline.Format(time.StampMilli), err, b)
	}
	return string(b), time.Now()
}

// TestConnectionsBounded (issue 27, defect 5): connections without a key,
// slow bodies, idle keep-alives and slow headers are all closed within the
// configured timeouts, and the process's open files come back to where
// they were.
func TestConnectionsBounded(t *testing.T) {
	const (
		timeout = 500 * time.Millisecond // each of the configured timeouts
		slack   = 2 * time.Second        // for 400 connections on a busy machine
		n       = 200
	)
	addr := serveOn(t, server.Config{HeaderTimeout: timeout, BodyTimeout: timeout, IdleTimeout: timeout, MaxConnectionsPerClient: -1})
	baseline := openFiles(t)

	type kind struct {
		name    string
		n       int
		request string // sent at once
		trickle bool   // then a byte of body every 50ms
		status  string // the answer's status line, "" for none
		within  time.Duration
	}
	slowBody := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n%s\r\n{"
	kinds := []kind{
		{"slow body without a key", n, fmt.Sprintf(slowBody, ""), true, "HTTP/1.1 401", slack},
		{"idle after /health", n, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", false, "HTTP/1.1 200", timeout + slack},
		{"slow body with a key", 20, fmt.Sprintf(slowBody, "Authorization: Bearer "+testKey+"\r\n"), true, "HTTP/1.1 408", timeout + slack},
		{"slow headers", 20, "GET /health HTTP/1.1\r\nHost: x\r\n", false, "", timeout + slack},
	}
	var (
		wg    sync.WaitGroup
		conns []net.Conn
	)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	var mu sync.Mutex
	worst := map[string]time.Duration{}
	for _, k := range kinds {
		for range k.n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, k.request); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			if k.trickle {
				wg.Go(func() {
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-done:
							return
						case <-tick.C:
							if _, err := io.WriteString(c, " "); err != nil {
								return // closed by the server
							}
						}
					}
				})
			}
			wg.Go(func() {
				defer close(done)
				got, at := closedBy(t, c, start.Add(k.within+time.Second))
				if !strings.HasPrefix(got, k.status) || k.status == "" && got != "" {
					t.Errorf("%s: read %q, want %q", k.name, got, k.status)
				}
				mu.Lock()
				worst[k.name] = max(worst[k.name], at.Sub(start))
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, k := range kinds {
		t.Logf("%d connections %s: the last closed %v after the start", k.n, k.name, worst[k.name].Round(time.Millisecond))
		if worst[k.name] > k.within {
			t.Errorf("%s: the last connection closed %v after the start, want within %v", k.name, worst[k.name], k.within)
		}
	}
	// Close ours; the server's ends are closed already.
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	files := openFiles(t)
	for ; files > baseline && time.Now().Before(deadline); files = openFiles(t) {
		time.Sleep(10 * time.Millisecond) // polling for the descriptors to close
	}
	t.Logf("open files: %d before, %d after", baseline, files)
	if files > baseline {
		t.Errorf("open files: %d after, want the %d before", files, baseline)
	}
}

// TestConnectionCaps: a connection over the caps is answered 429 (per
// client) or 503 (in all) with Retry-After and closed; one that closes
// gives its place back.
func TestConnectionCaps(t *testing.T) {
	for _, tt := range []struct {
		name             string
		total, perClient int
		status           int
	}{
		{"per client", -1, 3, http.StatusTooManyRequests},
		{"in all", 3, -1, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveOn(t, server.Config{MaxConnections: tt.total, MaxConnectionsPerClient: tt.perClient})
			var held []net.Conn
			for range 3 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				// A request answered proves the server accepted it.
				if resp := get(t, c); resp.StatusCode != http.StatusOK {
					t.Fatalf("connection within the cap: status %d", resp.StatusCode)
				}
				held = append(held, c)
			}
			over, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer over.Close()
			// Read without writing: the answer comes unasked, and a request
			// the server never reads would reset the connection.
			_ = over.SetDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(over), nil)
			if err != nil {
				t.Fatalf("over the cap: %v", err)
			}
			if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != "1" || !resp.Close {
				t.Errorf("over the cap: status %d, Retry-After %q, close %v; want %d, 1, true", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close, tt.status)
			}
			held[0].Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				status := get(t, c).StatusCode
				c.Close()
				if status == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a closed connection's place never came back: status %d", status)
				}
				time.Sleep(10 * time.Millisecond) // polling for the server to see the close
			}
		})
	}
}

// get sends GET /health on c and reads the answer.
func get(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
