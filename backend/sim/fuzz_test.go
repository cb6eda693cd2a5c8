package sim_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/llm"
)

// FuzzGenerate checks, for any schema the simulator accepts, that answers
// (valid or deliberately invalid, alone or packed, with corrupted
// entries) and tool arguments are JSON, that they are reproducible, and that a stream reassembles to the same response.
func FuzzGenerate(f *testing.F) {
	for _, raw := range testSchemas(f) {
		f.Add(raw, uint64(1), "Review path: src/main.go please", false)
	}
	f.Add(`{"type":"string"}`, uint64(2), `name: "quoted\value" \u0000`, true)
	f.Add(`{"type":"object","properties":{"name":{"type":"string"}}}`, uint64(3), "name=\x00\xff\"", false)
	f.Add(`{"$defs":{"n":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"},"b":{"$ref":"#/$defs/n"}},"required":["a","b"]}},"$ref":"#/$defs/n"}`, uint64(4), "", false)
	f.Add(`{"type":"array","minItems":10000,"items":{"type":"array","minItems":10000}}`, uint64(5), "", true)
	f.Add(`{"$ref":"#"}`, uint64(6), "", false)
	f.Add(`{"type":"integer","minimum":-1e308,"maximum":1e308,"multipleOf":1e-300}`, uint64(7), "", false)
	f.Add(`{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1}`, uint64(8), "", false)
	f.Add(`{"enum":[]}`, uint64(9), "", false)
	f.Add(`{"anyOf":[],"oneOf":[{"type":"null"}],"allOf":[true,false]}`, uint64(10), "", true)

	f.Fuzz(func(t *testing.T, raw string, seed uint64, task string, invalid bool) {
		cfg := sim.Config{Seed: seed}
		if invalid {
			cfg.InvalidRate = 1
		}
		req := &llm.Request{
			Messages: user(task),
			Output:   &llm.OutputSpec{Schema: json.RawMessage(raw)},
		}
		resp, err := newModel(t, cfg).Generate(t.Context(), req)
		if err != nil {
			return // a schema the simulator refuses
		}
		// An empty schema is no schema: the answer is text.
		if raw != "" && !json.Valid([]byte(resp.Message.Content)) {
			t.Fatalf("answer to %s = %q, not JSON", raw, resp.Message.Content)
		}
		again, err := newModel(t, cfg).Generate(t.Context(), req)
		if err != nil || again.Message.Content != resp.Message.Content {
			t.Fatalf("answer to %s = %q, then %q, %v, want the same answer", raw, resp.Message.Content, again.Message.Content, err)
		}

		// The same schema as the entries of a pack, corrupted or not: one
		// JSON value, reproducible.
		if invalid {
			cfg.CorruptRate = 0.5
		}
		packed := &llm.Request{
			Messages: []llm.Message{{Role: llm.RoleSystem, Content: "s"}, {Role: llm.RoleUser, Content: pack.Tasks([]string{task, task + "."})}},
			Output:   &llm.OutputSpec{Name: pack.SchemaName, Schema: pack.Schema(json.RawMessage(raw), 2)},
		}
		presp, err := newModel(t, cfg).Generate(t.Context(), packed)
		if err != nil || !json.Valid([]byte(presp.Message.Content)) {
			t.Fatalf("packed answer to %s = %v, %v, want a JSON object", raw, presp, err)
		}
		if again, err := newModel(t, cfg).Generate(t.Context(), packed); err != nil || again.Message.Content != presp.Message.Content {
			t.Fatalf("packed answer to %s = %q, then %v, %v, want the same answer", raw, presp.Message.Content, again, err)
		}

		// The same schema as a tool's parameters, with values from task.
		toolReq := &llm.Request{Messages: user(task), Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(raw)}}}
		tresp, err := newModel(t, cfg).Generate(t.Context(), toolReq)
		if err != nil {
			t.Fatalf("tool turn with parameters %s = %v, want the answer's schema accepted", raw, err)
		}
		if len(tresp.Message.ToolCalls) != 1 || !json.Valid(tresp.Message.ToolCalls[0].Arguments) {
			t.Fatalf("tool turn with parameters %s = %+v, want one call with JSON arguments", raw, tresp.Message)
		}

		var acc llm.Accumulator
		for ev, err := range newModel(t, cfg).Stream(t.Context(), toolReq) {
			if err != nil {
				t.Fatalf("Stream = %v", err)
			}
			acc.Add(ev)
		}
		// DeepEqual first: cmp walks a megabyte of arguments byte by byte.
		if got := acc.Response(); !reflect.DeepEqual(tresp, got) {
			t.Fatalf("Stream reassembled (-Generate +Stream):\n%s", cmp.Diff(tresp, got))
		}
	})
}
