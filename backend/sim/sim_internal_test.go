package sim

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// TestGeneratorCacheBound checks that the compiled-schema cache stays
// bounded under many distinct schemas, and that an answer does not depend
// on whether its generator was cached.
func TestGeneratorCacheBound(t *testing.T) {
	t.Parallel()
	m, err := New(Config{ToolTurns: -1})
	if err != nil {
		t.Fatal(err)
	}
	req := func(schema string) *llm.Request {
		return &llm.Request{
			Messages: []llm.Message{{Role: llm.RoleUser, Content: "task"}},
			Output:   &llm.OutputSpec{Name: "out", Schema: json.RawMessage(schema)},
		}
	}
	const first = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`
	before, err := m.Generate(t.Context(), req(first))
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxGenerators {
		schema := fmt.Sprintf(`{"type":"string","maxLength":%d}`, i+1)
		if _, err := m.Generate(t.Context(), req(schema)); err != nil {
			t.Fatalf("Generate(schema %s) = %v", schema, err)
		}
		if n := len(m.gens); n > maxGenerators {
			t.Fatalf("after %d schemas the cache holds %d generators, want at most %d", i+2, n, maxGenerators)
		}
	}
	if _, ok := m.gens[first]; ok {
		t.Errorf("the first schema is still cached after %d more, want it cleared", maxGenerators)
	}
	after, err := m.Generate(t.Context(), req(first))
	if err != nil {
		t.Fatal(err)
	}
	if after.Message.Content != before.Message.Content {
		t.Errorf("Generate(%s) after the cache was cleared = %q, want %q as before", first, after.Message.Content, before.Message.Content)
	}
}
