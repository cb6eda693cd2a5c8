// Package redistest starts a real redis-server for tests: one per call, on
// a free loopback port, with its data in the test's temporary directory,
// stopped when the test ends. The test command (scripts/test) installs
// redis-server when it is absent; a test that needs it fails, and says
// how to install it, where it cannot be found.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

	cmd *exec.Cmd
}

// Options configures Start.
type Options struct {
	// Password, when set, is required of clients (requirepass).
	Password string
}

// Start starts a redis-server for t, and stops it when t ends.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found (apt-get install -y redis-server; scripts/test installs it): %v", err)
	}
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no"}
		if opt.Password != "" {
			args = append(args, "--requirepass", opt.Password)
		}
		cmd := exec.Command(bin, args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start redis-server: %v", err)
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
		select {
		case err = <-ready:
		case <-time.After(10 * time.Second):
			err = fmt.Errorf("redis-server not ready after 10s")
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if attempt < 3 && strings.Contains(err.Error(), "Address already in use") {
				continue // the free port was taken meanwhile
			}
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Password: opt.Password, cmd: cmd}
		s.URL = "redis://" + s.Addr
		if opt.Password != "" {
			s.URL = "redis://:" + opt.Password + "@" + s.Addr
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = os.RemoveAll(filepath.Join(dir, "dump.rdb"))
		})
		return s
	}
}

// Stop kills the server now (SIGKILL): an outage.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
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
