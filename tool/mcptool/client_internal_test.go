package mcptool

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent/tool"
)

// TestSessionErrorStderrWait checks that the call that first finds a stdio
// session ended waits for the server's standard error only when the session
// ended on its own, not when Close ended it.
func TestSessionErrorStderrWait(t *testing.T) {
	tests := []struct {
		name   string
		closed bool // Close has started
		wait   time.Duration
	}{
		{name: "ended on its own", closed: false, wait: stderrSettle},
		{name: "ended by Close", closed: true, wait: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &Client{
					cfg:      ServerConfig{Name: "test"},
					stderr:   newTailWriter(stderrTail),
					ended:    make(chan struct{}),
					inflight: make(map[uint64]context.CancelCauseFunc),
					closed:   tt.closed,
				}
				close(c.ended)
				start := time.Now()
				_, err := c.call(t.Context(), "echo", nil)
				if !errors.Is(err, ErrSessionClosed) || !errors.Is(err, tool.ErrFatal) {
					t.Errorf("call on an ended session = %v, want an error wrapping ErrSessionClosed and tool.ErrFatal", err)
				}
				if got := time.Since(start); got != tt.wait {
					t.Errorf("call on an ended session took %v, want %v", got, tt.wait)
				}
			})
		})
	}
}
