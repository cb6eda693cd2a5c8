package redistest_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/batchagent/batchagent/internal/redistest"
)

// TestStartAnswersPing: the started server answers PING on its address
// and is gone once stopped.
func TestStartAnswersPing(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING = %q, %v; want +PONG", buf[:n], err)
	}
	c.Close()
	s.Stop()
	if c, err := net.Dial("tcp", s.Addr); err == nil {
		c.Close()
		t.Errorf("the server still accepts connections after Stop")
	}
}

// TestRestart: a server killed and restarted answers on the same address,
// with its data when it appends every change to its file, else empty.
func TestRestart(t *testing.T) {
	for _, appendOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("appendonly %v", appendOnly), func(t *testing.T) {
			s := redistest.Start(t, redistest.Options{AppendOnly: appendOnly})
			if got := command(t, s.Addr, "SET k v"); got != "+OK\r\n" {
				t.Fatalf("SET = %q, want +OK", got)
			}
			s.Stop()
			s.Restart(t)
			want := "$-1\r\n" // nil: the data is gone
			if appendOnly {
				want = "$1\r\nv\r\n"
			}
			if got := command(t, s.Addr, "GET k"); got != want {
				t.Errorf("GET k after the restart = %q, want %q", got, want)
			}
		})
	}
}

// command sends one inline command to the server at addr and returns its
// reply as read in one go.
func command(t *testing.T, addr, cmd string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}
