package simhttp_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

const packEntry = `{"type":"object","properties":{"label":{"enum":["bug","feature"]},"score":{"type":"integer","minimum":1,"maximum":5}},"required":["label","score"]}`

// packed is a packed request of tasks on the wire, and the same request
// as the engine gives the in-process model.
func packed(tasks []string) (body, *llm.Request) {
	system := "You triage issues.\n\n" + pack.Instructions("Answer with JSON.")
	user := pack.Tasks(tasks)
	schema := pack.Schema(json.RawMessage(packEntry), len(tasks))
	b := request(system, user).with("response_format", map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": pack.SchemaName, "strict": true, "schema": schema}})
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: system}, {Role: llm.RoleUser, Content: user}},
		Output:   &llm.OutputSpec{Name: pack.SchemaName, Schema: schema},
	}
	return b, req
}

type packMember struct {
	key   string
	value json.RawMessage
}

// packMembers returns the members of a JSON object, in order, duplicates
// kept.
func packMembers(t *testing.T, text string) []packMember {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("answer %s: not a JSON object (%v)", text, err)
	}
	var out []packMember
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("answer %s: %v", text, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("answer %s: %v", text, err)
		}
		out = append(out, packMember{k.(string), v})
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		t.Fatalf("answer %s: want one object and nothing after it (%v)", text, err)
	}
	return out
}

// TestServerPacked checks that a packed request, plain and streamed, gets
// one object with the pack's ids in order, each valid, the answer of the
// in-process model, and streamed a token at a time.
func TestServerPacked(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.Model = sim.Config{Seed: 4}
	ts := startServer(t, cfg)
	s, err := schema.Compile(json.RawMessage(packEntry))
	if err != nil {
		t.Fatal(err)
	}
	tasks := []string{"Issue 1: crash on start.", "Issue 2: add dark mode.", "Issue 3: typo in docs.", "Issue 4: slow build."}
	b, req := packed(tasks)
	want, err := sim.New(cfg.Model)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := want.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}

	plain := complete(t, ts, b)
	if plain.Message.Content != alone.Message.Content {
		t.Errorf("answer = %s, want the in-process model's %s", plain.Message.Content, alone.Message.Content)
	}
	var keys []string
	for _, m := range packMembers(t, plain.Message.Content) {
		keys = append(keys, m.key)
		if err := s.Validate(m.value); err != nil {
			t.Errorf("entry %s = %s: Validate = %v, want nil", m.key, m.value, err)
		}
	}
	if want := []string{"a1", "a2", "a3", "a4"}; !slices.Equal(keys, want) {
		t.Errorf("answer ids = %v, want %v", keys, want)
	}

	st := stream(t, ts, b)
	if st.resp.Message.Content != plain.Message.Content {
		t.Errorf("streamed answer = %s, want %s", st.resp.Message.Content, plain.Message.Content)
	}
	deltas := 0
	for _, c := range st.chunks {
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				deltas++
			}
		}
	}
	// A delta per token: the answer grows as it is decoded.
	if tokens := sim.Tokens(len(plain.Message.Content)); deltas != tokens {
		t.Errorf("answer of %d tokens streamed in %d content deltas, want one per token", tokens, deltas)
	}
}

// TestServerPackedCorrupt checks that the server passes the corruption
// rate to its model: at rate 1 no entry of a packed answer is intact.
func TestServerPackedCorrupt(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.Model = sim.Config{Seed: 5, CorruptRate: 1}
	ts := startServer(t, cfg)
	s, err := schema.Compile(json.RawMessage(packEntry))
	if err != nil {
		t.Fatal(err)
	}
	for p := range 5 {
		tasks := make([]string, 4)
		for i := range tasks {
			tasks[i] = fmt.Sprintf("Pack %d, issue %d.", p, i)
		}
		b, _ := packed(tasks)
		for _, streamed := range []bool{false, true} {
			var content string
			if streamed {
				content = stream(t, ts, b).resp.Message.Content
			} else {
				content = complete(t, ts, b).Message.Content
			}
			got := packMembers(t, content)
			for i := range tasks {
				id := pack.ID(i)
				var values []json.RawMessage
				for _, m := range got {
					if m.key == id {
						values = append(values, m.value)
					}
				}
				if len(values) == 1 && s.Validate(values[0]) == nil {
					t.Errorf("pack %d (stream %t): entry %s intact at corruption rate 1: %s", p, streamed, id, content)
				}
			}
		}
	}
}
