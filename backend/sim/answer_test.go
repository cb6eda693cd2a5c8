package sim_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

const seeds = 200

// TestAnswerValidates checks, with the real validator, that answers to every
// schema of testdata/schemas are valid for many seeds and tasks.
func TestAnswerValidates(t *testing.T) {
	t.Parallel()
	for name, raw := range testSchemas(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(raw))
			if err != nil {
				t.Fatalf("schema.Compile(%s) = %v", name, err)
			}
			distinct := map[string]bool{}
			for seed := range uint64(seeds) {
				m := newModel(t, sim.Config{Seed: seed})
				task := fmt.Sprintf("Classify item %d.", seed%7)
				resp := generate(t, t.Context(), m, answerRequest(task, raw))
				if resp.FinishReason != llm.FinishStop || len(resp.Message.ToolCalls) != 0 {
					t.Fatalf("seed %d: Generate = finish %q, %d tool calls, want a final answer", seed, resp.FinishReason, len(resp.Message.ToolCalls))
				}
				if err := s.Validate(json.RawMessage(resp.Message.Content)); err != nil {
					t.Fatalf("seed %d: Validate(%s) = %v, want nil", seed, resp.Message.Content, err)
				}
				distinct[resp.Message.Content] = true
			}
			t.Logf("%d distinct answers in %d", len(distinct), seeds)
		})
	}
}

// TestAnswerVaries checks that answers are not all alike: a simulator that
// always wrote the same value would satisfy TestAnswerValidates too.
func TestAnswerVaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema string
		min          int // distinct answers wanted over the seeds
	}{
		{"integer 1..5", `{"type":"integer","minimum":1,"maximum":5}`, 5},
		{"enum", `{"enum":["a","b","c"]}`, 3},
		{"boolean", `{"type":"boolean"}`, 2},
		{"string", `{"type":"string"}`, 50},
		{"array length", `{"type":"array","items":{"const":0},"minItems":1,"maxItems":4}`, 4},
		{"number", `{"type":"number","minimum":0,"maximum":1}`, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seen := map[string]bool{}
			for seed := range uint64(seeds) {
				m := newModel(t, sim.Config{Seed: seed})
				seen[generate(t, t.Context(), m, answerRequest("task", tt.schema)).Message.Content] = true
			}
			if len(seen) < tt.min {
				t.Errorf("%d seeds gave %d distinct answers %v, want at least %d", seeds, len(seen), keys(seen), tt.min)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// TestAnswerExact pins the answers of schemas with one valid value, so a
// regression in how values are written shows as a diff.
func TestAnswerExact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, want string
	}{
		{"const object", `{"const":{"b":[1,2],"a":"x"}}`, `{"a":"x","b":[1,2]}`},
		{"pinned integer", `{"type":"integer","minimum":42,"maximum":42}`, `42`},
		{"null", `{"type":"null"}`, `null`},
		{"type list of null", `{"type":["null"]}`, `null`},
		{"empty string", `{"type":"string","maxLength":0}`, `""`},
		{"empty array", `{"type":"array","maxItems":0}`, `[]`},
		{"default", `{"type":"string","default":"en"}`, `"en"`},
		{"first example", `{"type":"integer","examples":[25,50]}`, `25`},
		{"escaped enum", `{"enum":["a \"quoted\" <b>"]}`, `"a \"quoted\" \u003cb\u003e"`},
		{"sorted keys", `{"type":"object","properties":{"z":{"const":1},"a":{"const":2},"m":{"const":3}}}`, `{"a":2,"m":3,"z":1}`},
		{"undeclared required", `{"type":"object","required":["k"],"properties":{}}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{Seed: 3})
			got := generate(t, t.Context(), m, answerRequest("task", tt.schema)).Message.Content
			if tt.want == "" {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal([]byte(got), &obj); err != nil || obj["k"] == nil {
					t.Errorf("answer to %s = %s, want an object with k", tt.schema, got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("answer to %s = %s, want %s", tt.schema, got, tt.want)
			}
		})
	}
}

// TestAnswerInvalid checks that InvalidRate 1 makes every answer fail
// validation, and that a corrected request answered by a model with
// InvalidRate 0 is valid.
func TestAnswerInvalid(t *testing.T) {
	t.Parallel()
	for name, raw := range testSchemas(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(raw))
			if err != nil {
				t.Fatalf("schema.Compile(%s) = %v", name, err)
			}
			for seed := range uint64(20) {
				bad := newModel(t, sim.Config{Seed: seed, InvalidRate: 1})
				task := fmt.Sprintf("Classify item %d.", seed)
				req := answerRequest(task, raw)
				req.Tools = []llm.ToolDef{readFileTool}
				req.Messages = append(req.Messages,
					llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0_0", Name: "read_file", Arguments: json.RawMessage(`{"path":"x"}`)}}},
					llm.Message{Role: llm.RoleTool, ToolCallID: "call_0_0", Content: "contents"})
				resp := generate(t, t.Context(), bad, req)
				verr := s.Validate(json.RawMessage(resp.Message.Content))
				if verr == nil {
					t.Fatalf("seed %d: Validate(%s) = nil, want an error for InvalidRate 1", seed, resp.Message.Content)
				}

				// The caller's correction: the answer and the feedback.
				req.Messages = append(req.Messages, resp.Message,
					llm.Message{Role: llm.RoleUser, Content: "Your answer does not match the schema: " + verr.Error()})
				good := newModel(t, sim.Config{Seed: seed})
				fixed := generate(t, t.Context(), good, req)
				if len(fixed.Message.ToolCalls) != 0 {
					t.Fatalf("seed %d: correction got tool calls %v, want an answer", seed, fixed.Message.ToolCalls)
				}
				if err := s.Validate(json.RawMessage(fixed.Message.Content)); err != nil {
					t.Fatalf("seed %d: Validate(corrected %s) = %v, want nil", seed, fixed.Message.Content, err)
				}
			}
		})
	}
}

// TestAnswerInvalidRate checks the share of invalid answers and that a
// retry after feedback is drawn again rather than repeating the failure.
func TestAnswerInvalidRate(t *testing.T) {
	t.Parallel()
	raw := readSchema(t, "object_required")
	s, err := schema.Compile(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(t, sim.Config{Seed: 9, InvalidRate: 0.3})
	const n = 1000
	invalid, recovered := 0, 0
	for i := range n {
		req := answerRequest(fmt.Sprintf("item %d", i), raw)
		resp := generate(t, t.Context(), m, req)
		if s.Validate(json.RawMessage(resp.Message.Content)) == nil {
			continue
		}
		invalid++
		req.Messages = append(req.Messages, resp.Message, llm.Message{Role: llm.RoleUser, Content: "fix it"})
		if s.Validate(json.RawMessage(generate(t, t.Context(), m, req).Message.Content)) == nil {
			recovered++
		}
	}
	if invalid < 240 || invalid > 360 {
		t.Errorf("InvalidRate 0.3: %d of %d answers invalid, want about 300", invalid, n)
	}
	if want := invalid / 2; recovered < want {
		t.Errorf("InvalidRate 0.3: %d of %d retries valid, want at least %d", recovered, invalid, want)
	}
}

func readSchema(t *testing.T, name string) string {
	t.Helper()
	raw, ok := testSchemas(t)[name]
	if !ok {
		t.Fatalf("no testdata/schemas/%s.json", name)
	}
	return raw
}

// TestAnswerDeterministic checks that answers depend on the seed and the
// task only: not on the model instance or the calls made before.
func TestAnswerDeterministic(t *testing.T) {
	t.Parallel()
	const free = `{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"}},"required":["n","s"]}`
	a := newModel(t, sim.Config{Seed: 5})
	b := newModel(t, sim.Config{Seed: 5})
	// b has served other requests first.
	for i := range 10 {
		generate(t, t.Context(), b, answerRequest(fmt.Sprint("warm up ", i), free))
	}
	answers := map[string]string{}
	for i := range 50 {
		task := fmt.Sprintf("Summarise document %d.", i)
		got := generate(t, t.Context(), a, answerRequest(task, free)).Message.Content
		if again := generate(t, t.Context(), b, answerRequest(task, free)).Message.Content; again != got {
			t.Fatalf("task %q: answers %s and %s from two models with seed 5, want equal", task, got, again)
		}
		if prev, ok := answers[got]; ok {
			t.Errorf("tasks %q and %q both answered %s, want different answers", prev, task, got)
		}
		answers[got] = task
	}

	other := newModel(t, sim.Config{Seed: 6})
	same := 0
	for i := range 50 {
		task := fmt.Sprintf("Summarise document %d.", i)
		if _, ok := answers[generate(t, t.Context(), other, answerRequest(task, free)).Message.Content]; ok {
			same++
		}
	}
	if same > 2 {
		t.Errorf("seed 6 repeated %d of 50 answers of seed 5, want different answers", same)
	}
}

// TestAnswerWithoutSchema checks the plain-text answer of a request without
// an output schema.
func TestAnswerWithoutSchema(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{Seed: 1})
	req := &llm.Request{Messages: user("Say something.")}
	resp := generate(t, t.Context(), m, req)
	want := generate(t, t.Context(), newModel(t, sim.Config{Seed: 1}), req)
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("Generate differs between models (-first +second):\n%s", diff)
	}
	if resp.FinishReason != llm.FinishStop || len(resp.Message.Content) < len("Done. x") || resp.Message.Content[:6] != "Done. " {
		t.Errorf("Generate(no schema) = %q (finish %q), want \"Done. ...\" (stop)", resp.Message.Content, resp.FinishReason)
	}
	if resp.Message.Role != llm.RoleAssistant {
		t.Errorf("Generate(no schema) role = %q, want %q", resp.Message.Role, llm.RoleAssistant)
	}
}

// TestConcurrentAnswers checks that one model serves concurrent calls with
// the answers it gives serially.
func TestConcurrentAnswers(t *testing.T) {
	t.Parallel()
	raw := readSchema(t, "arrays")
	serial := newModel(t, sim.Config{Seed: 2})
	want := make([]string, 64)
	for i := range want {
		want[i] = generate(t, t.Context(), serial, answerRequest(fmt.Sprint("task ", i), raw)).Message.Content
	}
	shared := newModel(t, sim.Config{Seed: 2})
	got := make([]string, len(want))
	errs := make(chan error, len(want))
	done := make(chan struct{})
	for i := range got {
		go func() {
			defer func() { done <- struct{}{} }()
			resp, err := shared.Generate(t.Context(), answerRequest(fmt.Sprint("task ", i), raw))
			if err != nil {
				errs <- err
				return
			}
			got[i] = resp.Message.Content
		}()
	}
	for range got {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Generate = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("concurrent answers differ from serial ones (-serial +concurrent):\n%s", diff)
	}
	if s := shared.Stats(); s.Calls != int64(len(want)) {
		t.Errorf("Stats().Calls = %d, want %d", s.Calls, len(want))
	}
}
