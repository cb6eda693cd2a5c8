package main

import "testing"

// TestRun runs the workload with a few agents: every one answers (run
// fails otherwise), and a bad agent count is refused.
func TestRun(t *testing.T) {
	if err := run(20); err != nil {
		t.Fatalf("run(20) = %v, want nil", err)
	}
	if err := run(0); err == nil {
		t.Fatal("run(0) = nil, want an error")
	}
}
