package config_test

import (
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/config"
)

func TestParseOutageBudget(t *testing.T) {
	t.Parallel()
	j, err := config.Parse([]byte("task: x\nlimits:\n  outage_budget: 90s\n"), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(j.Limits.OutageBudget); got != 90*time.Second {
		t.Errorf("limits.outage_budget = %v, want 1m30s", got)
	}
	runProblemCases(t, t.TempDir(), []problemCase{
		{
			name: "negative outage budget",
			in:   "task: x\nlimits:\n  outage_budget: -1m\n",
			want: []config.Problem{{Line: 3, Col: 18, Path: "limits.outage_budget", Msg: "must not be negative, got -1m0s"}},
		},
		{
			name: "outage budget without a unit",
			in:   "task: x\nlimits:\n  outage_budget: 300\n",
			want: []config.Problem{{Line: 3, Col: 18, Path: "limits.outage_budget", Msg: `invalid duration 300: want a duration like "30s"`}},
		},
	})
}
