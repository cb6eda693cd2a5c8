package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter is a net.Listener that caps the connections open at once,
// in all and per client address. A connection over a cap is answered at
// once — 503 over the total, 429 over the client's — and closed, rather
// than left waiting in the kernel's queue with no word.
type connLimiter struct {
	net.Listener
	total, perClient int // caps; negative: unlimited
	log              *slog.Logger

	mu     sync.Mutex     // protects the fields below
	open   int            // connections open
	byAddr map[string]int // connections open per client address
}

func newConnLimiter(l net.Listener, total, perClient int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: l, total: total, perClient: perClient, log: log, byAddr: map[string]int{}}
}

// Accept returns the next connection within the caps; those over a cap
// are answered and closed on the way.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c.RemoteAddr())
		refused := l.take(addr)
		if refused == nil {
			return &limitedConn{Conn: c, l: l, addr: addr}, nil
		}
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "connection refused", slog.String("client", addr), slog.String("err", refused.message))
		refuseConn(c, refused)
	}
}

// take counts a connection from addr in, or returns why it is refused.
func (l *connLimiter) take(addr string) *apiError {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= 0 && l.open >= l.total {
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "too_many_connections", retryAfter: time.Second,
			message: fmt.Sprintf("the server has %d connections open, its most", l.open)}
	}
	if l.perClient >= 0 && l.byAddr[addr] >= l.perClient {
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "too_many_connections", retryAfter: time.Second,
			message: fmt.Sprintf("this client has %d connections open, its most: reuse them", l.byAddr[addr])}
	}
	l.open++
	l.byAddr[addr]++
	return nil
}

func (l *connLimiter) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

// refuseWriteTimeout bounds the writing of a refusal to a connection over
// a cap.
const refuseWriteTimeout = time.Second

// refuseConn writes e as an HTTP/1.1 answer on c, which the server never
// read from, and closes c.
func refuseConn(c net.Conn, e *apiError) {
	body := append(e.body(""), '\n')
	_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	// Errors are of no use: the connection closes either way.
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: %d\r\nConnection: close\r\n\r\n%s",
		e.status, http.StatusText(e.status), len(body), int(e.retryAfter/time.Second), body)
	_ = c.Close()
}

// clientAddr is the address that identifies a client: its IP, without
// the port.
func clientAddr(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitedConn gives its place back when it closes.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	addr string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}

// deadlineBody is a request body read under a deadline: the connection's
// read deadline, lifted when the body has been read to its end, so that
// net/http then watches the connection for the client leaving, without a
// deadline, however long the answer takes.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController

	mu   sync.Mutex // protects done
	done bool       // read to its end
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.mu.Lock()
		if !b.done {
			b.done = true
			_ = b.rc.SetReadDeadline(time.Time{}) // supported: it was set
		}
		b.mu.Unlock()
	}
	return n, err
}

// finish ends a request whose handler has returned: a body left unread
// is not waited for (net/http would read up to 256 KiB of it to keep the
// connection), so the connection closes once the answer is out.
func (b *deadlineBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		_ = b.rc.SetReadDeadline(time.Now())
	}
}
