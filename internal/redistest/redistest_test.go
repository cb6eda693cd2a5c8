package redistest_test

import (
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
