//go:build unix

package mcptool_test

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/batchagent/batchagent/tool/mcptool"
)

func TestCloseEndsProcess(t *testing.T) {
	c, err := mcptool.Connect(t.Context(), stdioConfig("1"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, byName(t, c, "pid"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid == os.Getpid() {
		t.Fatalf("pid = %q, %v, want the child's process ID", out, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("kill(%d, 0) before Close = %v, want the process alive", pid, err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	// Close waited for the process and reaped it: it no longer exists.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Close = %v, want ESRCH", pid, err)
	}
}
