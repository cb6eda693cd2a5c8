package config_test

import (
	"context"
	"testing"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
)

// nopModel is a model for specs that never run.
type nopModel struct{}

func (nopModel) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{}, nil
}

func TestParseOutageBudget(t *testing.T) {
	t.Parallel()
	j, err := config.Parse([]byte("task: x\nlimits:\n  outage_budget: 90s\n"), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Def.OutageBudget; got != 90*time.Second || j.Def.NoOutageBudget {
		t.Errorf("limits.outage_budget: 90s = %v (off %v), want 1m30s", got, j.Def.NoOutageBudget)
	}
	// The budget also bounds how long a run waits for a backend that never
	// answered: the start window is the shorter of the two.
	if got := j.Engine.Admission.StartWindow; got != batchagent.DefaultStartWindow {
		t.Errorf("start window under a 90s budget = %v, want the default %v", got, batchagent.DefaultStartWindow)
	}
	j, err = config.Parse([]byte("task: x\nlimits:\n  outage_budget: 3s\n"), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Engine.Admission.StartWindow; got != 3*time.Second {
		t.Errorf("start window under a 3s budget = %v, want 3s", got)
	}
	j, err = config.Parse([]byte("task: x\nlimits:\n  outage_budget: off\n"), "job.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !j.Def.NoOutageBudget || j.Def.OutageBudget != 0 || !j.Engine.Admission.NoStartWindow {
		t.Errorf("outage_budget: off = budget %v (off %v), no start window %v; want 0, off, no start window",
			j.Def.OutageBudget, j.Def.NoOutageBudget, j.Engine.Admission.NoStartWindow)
	}
	if _, err := batchagent.NewSpec(batchagent.Def{Model: nopModel{}, Task: "x", NoOutageBudget: j.Def.NoOutageBudget}); err != nil {
		t.Errorf("NewSpec with the decoded outage budget: %v", err)
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
			want: []config.Problem{{Line: 3, Col: 18, Path: "limits.outage_budget", Msg: `invalid duration 300: want a duration like "30s", or off`}},
		},
	})
}
