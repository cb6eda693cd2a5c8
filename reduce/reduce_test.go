package reduce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/reduce"
	"github.com/batchagent/batchagent/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSim(t *testing.T, cfg sim.Config) *sim.Model {
	t.Helper()
	m, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New(%+v) = %v", cfg, err)
	}
	return m
}

func newSpec(t *testing.T, d batchagent.Def) *batchagent.Spec {
	t.Helper()
	s, err := batchagent.NewSpec(d)
	if err != nil {
		t.Fatalf("NewSpec = %v", err)
	}
	return s
}

func newEngine(t *testing.T, cfg batchagent.Config) *batchagent.Engine {
	t.Helper()
	e, err := batchagent.New(cfg)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return e
}

func inputs(n int) []batchagent.Input {
	in := make([]batchagent.Input, n)
	for i := range in {
		in[i] = batchagent.Input{"id": fmt.Sprint(i)}
	}
	return in
}

const summarySchema = `{"type":"object","properties":{"summary":{"type":"string"},"count":{"type":"integer"}},"required":["summary","count"]}`

// TestRunReduceHierarchical maps 95 inputs and reduces their outputs in
// groups of 10: 10 groups at level 1, then one at level 2.
func TestRunReduceHierarchical(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 5, ToolTurns: -1})
	spec := newSpec(t, batchagent.Def{ID: "papers", Model: m, Task: "Summarise paper {id}.", OutputSchema: json.RawMessage(summarySchema)})
	r := reduce.Config{
		Task:         "Combine these summaries (level {level}, group {group}) into one: {outputs}",
		OutputSchema: json.RawMessage(summarySchema),
		GroupSize:    10,
	}
	results, rr, err := reduce.Run(t.Context(), newEngine(t, batchagent.Config{}), spec, batchagent.Slice(inputs(95)), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 95 || rr.Reduced != 95 || rr.Levels != 2 || rr.Calls != 11 {
		t.Errorf("results %d, reduce %+v; want 95 reduced over 2 levels in 11 calls", len(results), rr)
	}
	var out struct {
		Summary string `json:"summary"`
		Count   int    `json:"count"`
	}
	if err := json.Unmarshal(rr.Output, &out); err != nil || out.Summary == "" {
		t.Errorf("final output %s: %v, want a summary", rr.Output, err)
	}
	if got := m.Stats().Calls; got != 95+11 {
		t.Errorf("model calls = %d, want 95 map + 11 reduce", got)
	}
}

// TestReduceResumes reduces with a checkpoint twice: the second time no
// model is called, and the output is the same.
func TestReduceResumes(t *testing.T) {
	// A real store: each level is a job of its own, which the
	// fakeCheckpointer (keyed by index alone) would mix up.
	ck, err := checkpoint.Open(filepath.Join(t.TempDir(), "run.db"), checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	outs := make([]json.RawMessage, 30)
	for i := range outs {
		outs[i] = json.RawMessage(`{"summary":"s","count":1}`)
	}
	r := reduce.Config{Task: "Combine {outputs}", OutputSchema: json.RawMessage(summarySchema), GroupSize: 4}
	first := newSim(t, sim.Config{Seed: 1, ToolTurns: -1})
	a, err := reduce.Outputs(t.Context(), newEngine(t, batchagent.Config{Checkpoint: ck}), newSpec(t, batchagent.Def{ID: "r", Model: first, Task: "map"}), outs, r)
	if err != nil {
		t.Fatal(err)
	}
	again := newSim(t, sim.Config{Seed: 1, ToolTurns: -1})
	b, err := reduce.Outputs(t.Context(), newEngine(t, batchagent.Config{Checkpoint: ck}), newSpec(t, batchagent.Def{ID: "r", Model: again, Task: "map"}), outs, r)
	if err != nil {
		t.Fatal(err)
	}
	if again.Stats().Calls != 0 || string(a.Output) != string(b.Output) || a.Levels != 3 {
		t.Errorf("resumed reduce made %d calls, outputs %s vs %s, levels %d; want 0 calls, equal, 3 levels (30→8→2→1)", again.Stats().Calls, a.Output, b.Output, a.Levels)
	}
}

func TestReduceErrors(t *testing.T) {
	m := newSim(t, sim.Config{})
	j := newSpec(t, batchagent.Def{Model: m, Task: "x"})
	if _, err := reduce.Outputs(t.Context(), nil, j, []json.RawMessage{json.RawMessage(`1`)}, reduce.Config{}); !errors.Is(err, batchagent.ErrBadJob) || err.Error() != "batchagent: bad job: reduce: empty task template" {
		t.Errorf("empty reduce task: %v", err)
	}
	if _, err := reduce.Outputs(t.Context(), nil, j, nil, reduce.Config{Task: "{outputs}"}); err == nil || errors.Is(err, batchagent.ErrBadJob) {
		t.Errorf("nothing to reduce: %v, want an error that is not ErrBadJob", err)
	}
	if _, err := reduce.Outputs(t.Context(), nil, j, []json.RawMessage{json.RawMessage(`1`)}, reduce.Config{Task: "{outputs}", GroupSize: 1}); !errors.Is(err, batchagent.ErrBadJob) {
		t.Errorf("group size 1: %v, want ErrBadJob", err)
	}
	if _, err := reduce.Outputs(t.Context(), nil, nil, []json.RawMessage{json.RawMessage(`1`)}, reduce.Config{Task: "{outputs}"}); !errors.Is(err, batchagent.ErrBadJob) {
		t.Errorf("nil spec: %v, want ErrBadJob", err)
	}
	// An output that is not JSON would be sent to the model as an empty
	// {outputs}: it is named instead, before any model call.
	bad := []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`{"summary":`)}
	if _, err := reduce.Outputs(t.Context(), nil, j, bad, reduce.Config{Task: "{outputs}"}); err == nil || err.Error() != "batchagent: reduce: output 1 is not valid JSON" || m.Stats().Calls != 0 {
		t.Errorf("Outputs(invalid output 1) = %v after %d model calls; want output 1 named and no call", err, m.Stats().Calls)
	}
	// Outputs too big to pair within MaxBytes: a level would not shrink,
	// so the reduce stops at once instead of calling the model forever.
	big := json.RawMessage(`"` + strings.Repeat("x", 600) + `"`)
	_, err := reduce.Outputs(t.Context(), nil, j, []json.RawMessage{big, big, big}, reduce.Config{Task: "{outputs}", MaxBytes: 1000})
	if err == nil || !strings.Contains(err.Error(), "reduce level 1: no two neighbouring outputs of its 3 fit in max bytes 1000") || m.Stats().Calls != 0 {
		t.Errorf("outputs larger than MaxBytes/2: %v after %d model calls; want the no-progress error and no call", err, m.Stats().Calls)
	}
}

// TestReduceDropsTools reduces with the Spec of a map job that has a tool
// and a policy for it: the reduce agents get neither (a policy without its
// tool would be a bad job), and call the model once per group.
func TestReduceDropsTools(t *testing.T) {
	m := newSim(t, sim.Config{Seed: 3, ToolTurns: -1})
	echo := tool.Func(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, args json.RawMessage) (string, error) { return string(args), nil })
	spec := newSpec(t, batchagent.Def{ID: "m", Model: m, Task: "x {id}", Tools: []tool.Tool{echo},
		ToolPool: tool.PoolConfig{Policies: map[string]tool.Policy{"echo": {MaxConcurrent: 1}}}})
	outs := []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`2`), json.RawMessage(`3`)}
	rr, err := reduce.Outputs(t.Context(), nil, spec, outs, reduce.Config{Task: "Combine {outputs}"})
	if err != nil {
		t.Fatalf("Outputs = %v", err)
	}
	if rr.Calls != 1 || rr.Levels != 1 || m.Stats().Calls != 1 {
		t.Errorf("reduce %+v after %d model calls, want 1 call at 1 level", rr, m.Stats().Calls)
	}
}
