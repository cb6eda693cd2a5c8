package config_test

import (
	"bytes"
	"testing"

	"github.com/batchagent/batchagent/internal/config"
)

// TestRunIdentity: a job's run identity leaves out limits.max_cost's
// value, not whether a cap is set, nor anything else of the file.
func TestRunIdentity(t *testing.T) {
	base := "task: x # the task\nlimits:\n  max_cost: 150\n  max_inflight: 4\n"
	same := []string{
		"task: x # the task\nlimits:\n  max_cost: 1000\n  max_inflight: 4\n",
		"task: x # the task\nlimits:\n  max_cost: 1.5e3\n  max_inflight: 4\n",
	}
	other := []string{
		"task: x # the task\nlimits:\n  max_inflight: 4\n",                  // no cap
		"task: y # the task\nlimits:\n  max_cost: 150\n  max_inflight: 4\n", // another task
		"task: x # the task\nlimits:\n  max_cost: 150\n  max_inflight: 8\n",
	}
	id := config.RunIdentity([]byte(base))
	for _, s := range same {
		if !bytes.Equal(config.RunIdentity([]byte(s)), id) {
			t.Errorf("identity of %q differs from %q's: only the cap changed", s, base)
		}
	}
	for _, s := range other {
		if bytes.Equal(config.RunIdentity([]byte(s)), id) {
			t.Errorf("identity of %q equals %q's", s, base)
		}
	}
	for _, s := range []string{"task: x\n", "task: [unclosed\n", "limits: {max_cost: 5}\ntask: x\n"} {
		if got := config.RunIdentity([]byte(s)); s != "limits: {max_cost: 5}\ntask: x\n" && string(got) != s {
			t.Errorf("identity of %q (no cap, or no YAML) = %q, want the bytes as they are", s, got)
		}
	}
	if !bytes.Equal(config.RunIdentity([]byte("limits: {max_cost: 5}\ntask: x\n")), config.RunIdentity([]byte("limits: {max_cost: 7}\ntask: x\n"))) {
		t.Errorf("flow-style limits: identities differ by the cap")
	}
}
