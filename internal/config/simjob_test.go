package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool"
)

// runSimJob runs the job file text (written to a temporary directory
// holding src/a.go) over inputs on a new engine, opened as the CLI opens
// a job: its backend, its tools and its Def. It returns the engine's
// stats and the results.
func runSimJob(t *testing.T, text string, inputs []batchagent.Input) (batchagent.Stats, []batchagent.Result) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "a.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cj, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load(%s) = %v", path, err)
	}
	model, err := config.OpenBackend(t.Context(), cj.Backend, cj.Def.ModelName, cj.APIKeyEnv, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cj.OpenTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tools.Close() })
	def := cj.Def
	def.Model, def.Tools = model, tools.Tools
	spec, err := batchagent.NewSpec(def)
	if err != nil {
		t.Fatalf("NewSpec = %v", err)
	}
	e, err := batchagent.New(cj.Engine)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(t.Context(), spec, batchagent.Slice(inputs))
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	return e.Stats(), res
}

// toolStats returns the stats of the tool named name.
func toolStats(t *testing.T, st batchagent.Stats, name string) tool.Stats {
	t.Helper()
	var sum tool.Stats
	for _, ts := range st.Tools {
		if ts.Name == name {
			sum.Requested += ts.Requested
			sum.Executed += ts.Executed
			sum.Errors += ts.Errors
		}
	}
	return sum
}

const readFileJob = `backend: sim://
model: sim-1
task: "Summarise the Go file {file}"
tools:
  - name: read_file
    roots: [src]
`

// TestSimToolArgsFromInput runs a job file whose input names a file and
// whose tool read_file takes a path ("Path of the file, …"): the
// simulator passes the input's file as the path, so every read succeeds.
func TestSimToolArgsFromInput(t *testing.T) {
	t.Parallel()
	inputs := make([]batchagent.Input, 20)
	for i := range inputs {
		inputs[i] = batchagent.Input{"file": "a.go", "id": fmt.Sprint(i)}
	}
	st, res := runSimJob(t, readFileJob, inputs)
	got := toolStats(t, st, "read_file")
	if got.Requested != 20 || got.Executed == 0 || got.Errors != 0 {
		t.Errorf("read_file stats = %+v, want 20 requested, executed, 0 errors", got)
	}
	for _, r := range res {
		if r.Err != nil || r.ToolCalls != 1 || r.ToolErrors != 0 {
			t.Errorf("result %d = err %v, %d tool calls, %d tool errors, want ok after 1 call, 0 errors", r.Index, r.Err, r.ToolCalls, r.ToolErrors)
		}
	}
}

// TestSimToolErrorsCounted runs a job file whose 20 inputs name a file
// that does not exist: each agent's read_file call fails, goes back to the
// model as an error result (the agent still answers), and the engine's
// stats count the 20 tool errors, and so does each result.
func TestSimToolErrorsCounted(t *testing.T) {
	t.Parallel()
	inputs := make([]batchagent.Input, 20)
	for i := range inputs {
		inputs[i] = batchagent.Input{"file": fmt.Sprintf("missing%d.go", i)}
	}
	st, res := runSimJob(t, readFileJob, inputs)
	got := toolStats(t, st, "read_file")
	if got.Requested != 20 || got.Errors != 20 {
		t.Errorf("read_file stats = %+v, want 20 requested, 20 errors", got)
	}
	if st.ToolCalls != 20 || st.OK != 20 {
		t.Errorf("Stats = %d tool calls, %d ok, want 20 and 20", st.ToolCalls, st.OK)
	}
	for _, r := range res {
		if r.Err != nil || r.ToolCalls != 1 || r.ToolErrors != 1 {
			t.Errorf("result %d = err %v, %d tool calls, %d tool errors, want ok after 1 call, 1 error", r.Index, r.Err, r.ToolCalls, r.ToolErrors)
		}
	}
	// The result line says so too.
	line, err := res[0].AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"tool_calls":1,"tool_errors":1,`) {
		t.Errorf("result line = %s, want \"tool_calls\":1,\"tool_errors\":1", line)
	}
}
