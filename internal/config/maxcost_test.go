package config_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/internal/config"
)

// TestMaxCost: limits.max_cost reads as dollars, marshals back, and
// anything but a number > 0 is an error naming the key and its line.
func TestMaxCost(t *testing.T) {
	j, err := config.Parse([]byte("task: x\nlimits:\n  max_cost: 12.5\n"), "job.yaml", "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	if j.MaxCost != 12.5 {
		t.Errorf("MaxCost = %v, want 12.5", j.MaxCost)
	}
	out, err := yaml.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse(out, "job.yaml", "/jobs")
	if err != nil || back.MaxCost != 12.5 {
		t.Errorf("marshalled and parsed again: MaxCost %v, err %v; want 12.5\n%s", back.MaxCost, err, out)
	}
	for _, v := range []string{"0", "-3", ".nan", ".inf", "lots"} {
		_, err := config.Parse([]byte("task: x\nlimits:\n  max_cost: "+v+"\n"), "job.yaml", "/jobs")
		if err == nil || !strings.Contains(err.Error(), "limits.max_cost") || !strings.Contains(err.Error(), "3:") {
			t.Errorf("max_cost: %s: error %v, want one naming limits.max_cost at line 3", v, err)
		}
	}
}
