package sim_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newModel returns a simulator for cfg, failing the test if cfg is invalid.
func newModel(t testing.TB, cfg sim.Config) *sim.Model {
	t.Helper()
	m, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New(%+v) = %v", cfg, err)
	}
	return m
}

// generate calls m.Generate and fails the test on an error.
func generate(t testing.TB, ctx context.Context, m *sim.Model, req *llm.Request) *llm.Response {
	t.Helper()
	resp, err := m.Generate(ctx, req)
	if err != nil {
		t.Fatalf("Generate(%s) = %v", reqString(req), err)
	}
	return resp
}

func reqString(req *llm.Request) string {
	b, _ := json.Marshal(req)
	return string(b)
}

// user is a conversation of one user message.
func user(task string) []llm.Message {
	return []llm.Message{{Role: llm.RoleUser, Content: task}}
}

// answerRequest asks for an answer to task in the given output schema.
func answerRequest(task, schema string) *llm.Request {
	return &llm.Request{
		Messages: user(task),
		Output:   &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(schema)},
	}
}

// testSchemas returns the schemas of testdata/schemas by file name.
func testSchemas(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "schemas", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in testdata/schemas: %v", err)
	}
	out := make(map[string]string, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = string(b)
	}
	return out
}

var (
	readFileTool = llm.ToolDef{
		Name:        "read_file",
		Description: "Read a file of the repository.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	}
	grepTool = llm.ToolDef{
		Name:        "grep",
		Description: "Search files for a pattern.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"pattern":{"type":"string","default":"TODO"},"max":{"type":"integer","minimum":1,"maximum":50},"mode":{"enum":["fixed","regexp"]}},"required":["path","pattern"]}`),
	}
	noArgsTool = llm.ToolDef{Name: "list_files", Description: "List the repository."}
)
