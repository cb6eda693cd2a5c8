package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCancelEndsBlockedCalls: cancelling the context of a blocked Read or
// Results ends it at once, not when its block time is up.
func TestCancelEndsBlockedCalls(t *testing.T) {
	c, _ := open(t)
	createRun(t, c, "r")
	for name, call := range map[string]func(ctx context.Context) error{
		"Read":    func(ctx context.Context) error { _, err := c.Read(ctx, "w", 1, time.Minute); return err },
		"Results": func(ctx context.Context) error { _, err := c.Results(ctx, "r", "", 1, time.Minute); return err },
	} {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- call(ctx) }()  // owned by this loop: it waits on done
		time.Sleep(100 * time.Millisecond) // let it block (or not: either way it must end)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s cancelled = %v, want context.Canceled", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still blocked 30s after its context was cancelled", name)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s returned %v after start, want soon after the cancel", name, d)
		}
	}
	// The client still works after cancelled blocking calls.
	if _, err := c.RunStatus(t.Context(), "r"); err != nil {
		t.Fatalf("RunStatus after cancels = %v", err)
	}
	if err := c.Touch(t.Context(), "w", []string{"1-1"}); err != nil {
		t.Fatalf("Touch of a task not held = %v, want nil", err)
	}
}
