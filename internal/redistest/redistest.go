// Package redistest starts a real redis-server for tests: one per call, on
// a free loopback port, with its data in the test's temporary directory,
// stopped when the test ends. The test command (scripts/test) installs
// redis-server when it is absent; a test that needs it fails, and says
// how to install it, where it cannot be found.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	// Addr is its host:port on the loopback interface.
	Addr string
	// URL is its redis:// URL, with the password when one is set.
	URL string
	// Password is the password clients must give (requirepass); empty
	// means none.
	Password string

	bin  string
	dir  string
	opt  Options
	port int

	mu  sync.Mutex // protects cmd
	cmd *exec.Cmd  // nil while stopped
}

// Options configures Start.
type Options struct {
	// Password, when set, is required of clients (requirepass).
	Password string
	// AppendOnly makes the server write every change to its append-only
	// file before it answers (appendonly yes, appendfsync always), so that
	// one killed and restarted ([Server.Restart]) comes back with its
	// data. Otherwise it persists nothing and restarts empty.
	AppendOnly bool
}

// Start starts a redis-server for t, and stops it when t ends.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found (apt-get install -y redis-server; scripts/test installs it): %v", err)
	}
	s := &Server{Password: opt.Password, bin: bin, dir: t.TempDir(), opt: opt}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		err = s.start(port)
		if err != nil && attempt < 3 && strings.Contains(err.Error(), "Address already in use") {
			continue // the free port was taken meanwhile
		}
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		break
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	s.URL = "redis://" + s.Addr
	if opt.Password != "" {
		s.URL = "redis://:" + opt.Password + "@" + s.Addr
	}
	t.Cleanup(func() {
		s.Stop()
		_ = os.RemoveAll(filepath.Join(s.dir, "dump.rdb"))
	})
	return s
}

// start runs redis-server on port and waits until it accepts connections.
func (s *Server) start(port int) error {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--protected-mode", "no", "--daemonize", "no"}
	if s.opt.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.opt.Password != "" {
		args = append(args, "--requirepass", s.opt.Password)
	}
	cmd := exec.Command(s.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	ready := make(chan error, 1)
	go func() { // owned by the server: it ends when its output does
		sc := bufio.NewScanner(out)
		var lines []string
		sent := false
		for sc.Scan() {
			line := sc.Text()
			lines = append(lines, line)
			if !sent && strings.Contains(line, "Ready to accept connections") {
				ready <- nil
				sent = true
			}
		}
		if !sent {
			ready <- fmt.Errorf("redis-server exited: %s", strings.Join(lines, "\n"))
		}
	}()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case err = <-ready:
	case <-t.C:
		err = errors.New("redis-server not ready after 10s")
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	s.mu.Lock()
	s.cmd, s.port = cmd, port
	s.mu.Unlock()
	return nil
}

// Stop kills the server now (SIGKILL): an outage. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Restart starts the server again on its address after [Server.Stop]:
// with its data when it was started with [Options.AppendOnly], else
// empty. It fails t when the server cannot start.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(s.port); err != nil {
		t.Fatalf("redistest: restart on %s: %v", s.Addr, err)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
