package queue_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/redistest"
	"github.com/batchagent/batchagent/queue"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://:s3cret@127.0.0.1:6379/2", "redis://:xxxxx@127.0.0.1:6379/2"},
		{"rediss://user:s3cret@h:6380", "rediss://user:xxxxx@h:6380"},
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"redis://user@h", "redis://user@h"},
		{"redis://:s3c%zzret@h:1", "redis://xxxxx@h:1"},   // does not parse
		{"redis://:s3c/ret@h:1/0", "redis://xxxxx@h:1/0"}, // "/" in the password
	}
	for _, tt := range tests {
		if got := queue.RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// noSecret fails t when err is nil or its text holds secret.
func noSecret(t *testing.T, what string, err error, secret string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s = nil, want an error", what)
		return
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("%s = %q, which shows the password", what, err)
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	const pw = "Pa55-w0rd-s3cret"
	s := redistest.Start(t, redistest.Options{Password: pw})
	ctx := t.Context()

	c := openURL(t, s.URL) // the right password works
	createRun(t, c, "r")

	for _, bad := range []string{
		"redis://:" + pw + "-wrong@" + s.Addr, // refused by the server
		"redis://default:" + pw + "@" + s.Addr + "/notadb",
		"redis://:" + pw + "@" + s.Addr + "?bogus=" + pw,
		"redis://:" + pw + "@" + s.Addr + ":notaport",
		"redis://:" + pw + "%zz@" + s.Addr,
		"ftp://:" + pw + "@" + s.Addr,
	} {
		_, err := queue.Open(ctx, bad, queue.Options{})
		noSecret(t, "Open("+queue.RedactURL(bad)+")", err, pw)
	}
	// The server gone, every call fails without showing the password.
	s.Stop()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.RunStatus(short, "r")
	noSecret(t, "RunStatus after the server stopped", err, pw)
	_, err = queue.Open(short, s.URL, queue.Options{})
	noSecret(t, "Open(stopped server)", err, pw)
}

func TestServerGone(t *testing.T) {
	c, s := open(t)
	ctx := t.Context()
	createRun(t, c, "r")
	enqueue(t, c, "r", 0, 1)
	tasks, err := c.Read(ctx, "w", 1, 0)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("Read = %v, %v", tasks, err)
	}

	// A Read blocked when the server dies returns an error.
	blocked := make(chan error, 1)
	go func() { // owned by the test: it waits on blocked
		_, err := c.Read(ctx, "w2", 1, 30*time.Second)
		blocked <- err
	}()
	// Let the Read reach the server; if it has not yet, it fails to
	// connect instead, which the test accepts too.
	time.Sleep(100 * time.Millisecond)
	s.Stop()
	select {
	case err := <-blocked:
		if err == nil {
			t.Errorf("blocked Read after the server died = nil, want an error")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("blocked Read did not return 20s after the server died")
	}

	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cp := c.Checkpointer()
	calls := map[string]func() error{
		"CreateRun": func() error { _, _, err := c.CreateRun(short, queue.Run{ID: "x"}); return err },
		"RunStatus": func() error { _, err := c.RunStatus(short, "r"); return err },
		"Runs":      func() error { _, err := c.Runs(short); return err },
		"SetTotal":  func() error { return c.SetTotal(short, "r", 1) },
		"Enqueue":   func() error { return c.Enqueue(short, "r", 1, []byte(`{}`)) },
		"Read":      func() error { _, err := c.Read(short, "w", 1, time.Second); return err },
		"Reclaim":   func() error { _, err := c.Reclaim(short, "w", 0, 1); return err },
		"Touch":     func() error { return c.Touch(short, "w", []string{tasks[0].ID}) },
		"Ack":       func() error { return c.Ack(short, tasks[0]) },
		"Beat":      func() error { return c.Beat(short, "w", 1, time.Second) },
		"Workers":   func() error { _, err := c.Workers(short); return err },
		"Record":    func() error { _, err := c.Record(short, "r", 0, []byte("x")); return err },
		"Results":   func() error { _, err := c.Results(short, "r", "", 1, time.Second); return err },
		"Save":      func() error { return cp.Save(short, stateOf("r", 0)) },
		"Load":      func() error { _, err := cp.Load(short, "r"); return err },
		"DeleteRun": func() error { return c.DeleteRun(short, "r") },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if err == nil {
			t.Errorf("%s with the server gone = nil, want an error", name)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %v with the server gone, past its 3s context", name, d)
		}
	}
}

// TestContextBoundsAHungServer: a server that accepts connections and never
// answers holds a call no longer than its context.
func TestContextBoundsAHungServer(t *testing.T) {
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // protects conns
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() { // accepts until ln closes
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	})
	defer func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = queue.Open(ctx, "redis://"+ln.Addr().String(), queue.Options{})
	if err == nil {
		t.Fatalf("Open(hung server) = nil, want an error")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open(hung server) took %v, want about its 300ms context", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("Open(hung server) = %v (not wrapping DeadlineExceeded)", err)
	}
}

// TestTLS runs a redis-server with TLS on a self-signed certificate made
// here: a rediss:// URL connects, verifying the certificate (refused
// unless skip_verify=true), and a redis:// URL does not get through.
func TestTLS(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found: %v", err)
	}
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	port := freePort(t)
	var out strings.Builder
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-auth-clients", "no",
		"--dir", dir, "--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server with TLS not listening after 10s: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := queue.Open(ctx, "rediss://"+addr, queue.Options{}); err == nil {
		t.Errorf("Open(rediss, self-signed, verifying) = nil, want a certificate error")
	}
	if _, err := queue.Open(ctx, "redis://"+addr, queue.Options{}); err == nil {
		t.Errorf("Open(redis:// to a TLS port) = nil, want an error")
	}
	c := openURL(t, "rediss://"+addr+"?skip_verify=true")
	createRun(t, c, "tls")
	if st, err := c.RunStatus(ctx, "tls"); err != nil || st.ID != "tls" {
		t.Fatalf("RunStatus over TLS = %+v, %v", st, err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
