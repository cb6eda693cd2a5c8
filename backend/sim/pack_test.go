package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// entrySchema is the output schema of the packed jobs of these tests:
// AppendInvalid leaves out its required property.
const entrySchema = `{"type":"object","properties":{"label":{"enum":["bug","feature","question"]},"score":{"type":"integer","minimum":1,"maximum":5}},"required":["label","score"]}`

const packSystem = "You triage issues."

// packRequest is a packed request for tasks, as the engine builds it:
// the system prompt and pack.Instructions, the tasks, and the pack schema
// of entry (empty: text answers).
func packRequest(entry string, tasks ...string) *llm.Request {
	instr := ""
	if entry != "" {
		instr = "Answer with JSON."
	}
	return &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: packSystem + "\n\n" + pack.Instructions(instr)},
			{Role: llm.RoleUser, Content: pack.Tasks(tasks)},
		},
		Output: &llm.OutputSpec{Name: pack.SchemaName, Schema: pack.Schema(json.RawMessage(entry), len(tasks))},
	}
}

// aloneRequest is the unpacked request of one task.
func aloneRequest(entry, task string) *llm.Request {
	req := &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: packSystem},
		{Role: llm.RoleUser, Content: task},
	}}
	if entry != "" {
		req.Output = &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(entry)}
	}
	return req
}

// member is one member of a JSON object, in the order written.
type member struct {
	key   string
	value json.RawMessage
}

// members returns the members of the JSON object text, in order,
// duplicates kept.
func members(t *testing.T, text string) []member {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("answer %s: not a JSON object (%v)", text, err)
	}
	var out []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("answer %s: %v", text, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("answer %s: member %v: %v", text, k, err)
		}
		out = append(out, member{k.(string), v})
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		t.Fatalf("answer %s: want one object and nothing after it (%v)", text, err)
	}
	return out
}

func tasksOf(prefix string, n int) []string {
	tasks := make([]string, n)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("%s %d: the build fails on ARM since v1.%d.", prefix, i, i%7)
	}
	return tasks
}

// TestPackedAnswer checks that a packed answer is one object with every
// id in order, each value valid for the entry schema, for every schema of
// testdata/schemas.
func TestPackedAnswer(t *testing.T) {
	t.Parallel()
	schemas := testSchemas(t)
	schemas["triage"] = entrySchema
	for name, raw := range schemas {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(raw))
			if err != nil {
				t.Fatalf("schema.Compile(%s) = %v", name, err)
			}
			m := newModel(t, sim.Config{Seed: 3})
			tasks := tasksOf("Issue", 7)
			resp := generate(t, t.Context(), m, packRequest(raw, tasks...))
			if resp.FinishReason != llm.FinishStop || len(resp.Message.ToolCalls) != 0 {
				t.Fatalf("Generate = finish %q, %d tool calls, want a final answer", resp.FinishReason, len(resp.Message.ToolCalls))
			}
			got := members(t, resp.Message.Content)
			var keys []string
			for _, mb := range got {
				keys = append(keys, mb.key)
				if err := s.Validate(mb.value); err != nil {
					t.Errorf("entry %s = %s: Validate = %v, want nil", mb.key, mb.value, err)
				}
			}
			want := []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7"}
			if !slices.Equal(keys, want) {
				t.Errorf("answer ids = %v, want %v", keys, want)
			}
			if st := m.Stats(); st.Packed != 1 || st.Corrupted != 0 {
				t.Errorf("Stats = %+v, want 1 packed answer and no corruption", st)
			}
			if want := int64(sim.Tokens(len(resp.Message.Content))); resp.Usage.CompletionTokens != want {
				t.Errorf("completion tokens = %d, want %d (the whole answer)", resp.Usage.CompletionTokens, want)
			}
		})
	}
}

// TestPackedEqualsAlone checks that each entry of a packed answer is the
// answer its task gets alone (a request with the job's system prompt and
// the task), also when answers are invalid at random, and for text.
func TestPackedEqualsAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		entry string
		cfg   sim.Config
	}{
		{"schema", entrySchema, sim.Config{Seed: 5}},
		{"schema with invalid answers", entrySchema, sim.Config{Seed: 6, InvalidRate: 0.5}},
		{"text", "", sim.Config{Seed: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Compile(json.RawMessage(entrySchema))
			if err != nil {
				t.Fatal(err)
			}
			m := newModel(t, tt.cfg)
			tasks := tasksOf("Ticket", 12)
			got := members(t, generate(t, t.Context(), m, packRequest(tt.entry, tasks...)).Message.Content)
			if len(got) != len(tasks) {
				t.Fatalf("answer has %d members, want %d", len(got), len(tasks))
			}
			invalid := 0
			for i, task := range tasks {
				alone := generate(t, t.Context(), m, aloneRequest(tt.entry, task)).Message.Content
				want := alone
				if tt.entry == "" {
					b, _ := json.Marshal(alone)
					want = string(b)
				} else if s.Validate(json.RawMessage(alone)) != nil {
					invalid++
				}
				if string(got[i].value) != want {
					t.Errorf("entry %s = %s, want %s, the answer to %q alone", got[i].key, got[i].value, want, task)
				}
			}
			if tt.cfg.InvalidRate > 0 && (invalid == 0 || invalid == len(tasks)) {
				t.Errorf("%d of %d answers invalid at rate %v, want some and not all", invalid, len(tasks), tt.cfg.InvalidRate)
			}
		})
	}
}

// TestPackedDeterministic checks that a packed request gets the same bytes
// every time, from the same model or another with the same seed, with
// corruption too, and that the seed matters.
func TestPackedDeterministic(t *testing.T) {
	t.Parallel()
	cfg := sim.Config{Seed: 9, InvalidRate: 0.2, CorruptRate: 0.3}
	req := packRequest(entrySchema, tasksOf("Bug", 20)...)
	m := newModel(t, cfg)
	first := generate(t, t.Context(), m, req).Message.Content
	for i, other := range []*sim.Model{m, newModel(t, cfg)} {
		if got := generate(t, t.Context(), other, req).Message.Content; got != first {
			t.Errorf("answer %d = %s, want %s as the first time", i, got, first)
		}
	}
	cfg.Seed++
	if got := generate(t, t.Context(), newModel(t, cfg), req).Message.Content; got == first {
		t.Errorf("answer with seed %d = %s, the same as with seed %d, want them to differ", cfg.Seed, got, cfg.Seed-1)
	}
}

// corruptions classifies the entries of a packed answer to ids: the kind
// of each corruption drawn ("invalid", "missing", "duplicate", "unknown"),
// and the entries that are intact. valid reports whether a value is.
func corruptions(t *testing.T, ids []string, got []member, valid func(json.RawMessage) bool) (kinds map[string]int, intact int) {
	t.Helper()
	kinds = map[string]int{}
	j := 0
	for i := 0; i < len(ids); i++ {
		id := ids[i]
		switch {
		case j < len(got) && got[j].key == "zz"+id:
			kinds["unknown"]++
			j++
		case j+1 < len(got) && got[j].key == id && got[j+1].key == id:
			kinds["duplicate"]++
			j += 2
			i++ // the next entry's value went to this id
		case j < len(got) && got[j].key == id && !valid(got[j].value):
			kinds["invalid"]++
			j++
		case j < len(got) && got[j].key == id:
			intact++
			j++
		default:
			kinds["missing"]++
		}
	}
	if j != len(got) {
		t.Fatalf("answer members %v: %d left after the ids %v", got, len(got)-j, ids)
	}
	return kinds, intact
}

func TestPackedCorrupt(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile(json.RawMessage(entrySchema))
	if err != nil {
		t.Fatal(err)
	}
	valid := func(v json.RawMessage) bool { return s.Validate(v) == nil }
	tests := []struct {
		name          string
		rate          float64
		packs, size   int
		lo, hi        float64 // bounds of the share of entries corrupted
		equalKindsTol float64 // when > 0, each kind's share of the corruptions is 1/4 ± this
	}{
		{"always", 1, 160, 4, 0.75, 1, 0.07},
		{"tenth", 0.1, 200, 10, 0.05, 0.15, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, sim.Config{Seed: 11, CorruptRate: tt.rate})
			kinds := map[string]int{}
			drawn := 0
			for p := range tt.packs {
				req := packRequest(entrySchema, tasksOf(fmt.Sprintf("Pack %d issue", p), tt.size)...)
				resp := generate(t, t.Context(), m, req)
				ids := make([]string, tt.size)
				for i := range ids {
					ids[i] = pack.ID(i)
				}
				k, intact := corruptions(t, ids, members(t, resp.Message.Content), valid)
				n := 0
				for kind, c := range k {
					kinds[kind] += c
					n += c
				}
				drawn += n
				// At rate 1 every entry is corrupted: drawn, or taken by a
				// duplicate.
				if tt.rate == 1 && intact != 0 {
					t.Errorf("pack %d: %d entries intact at rate 1: %s", p, intact, resp.Message.Content)
				}
			}
			entries := tt.packs * tt.size
			if share := float64(drawn) / float64(entries); share < tt.lo || share > tt.hi {
				t.Errorf("%d of %d entries corrupted (%.3f), want a share in [%v, %v]", drawn, entries, share, tt.lo, tt.hi)
			}
			if st := m.Stats(); st.Corrupted != int64(drawn) || st.Packed != int64(tt.packs) {
				t.Errorf("Stats = %+v, want %d packed answers and %d corrupted entries", st, tt.packs, drawn)
			}
			if tt.equalKindsTol == 0 {
				return
			}
			for _, kind := range []string{"invalid", "missing", "duplicate", "unknown"} {
				if share := float64(kinds[kind]) / float64(drawn); math.Abs(share-0.25) > tt.equalKindsTol {
					t.Errorf("%s: %d of %d corruptions (%.3f), want about a quarter", kind, kinds[kind], drawn, share)
				}
			}
			t.Logf("corruptions by kind: %v of %d entries", kinds, entries)
		})
	}
}

// TestPackedCorruptLast checks that a duplicate of the last entry writes
// its member twice.
func TestPackedCorruptLast(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{Seed: 1, CorruptRate: 1})
	for p := range 200 {
		resp := generate(t, t.Context(), m, packRequest(entrySchema, fmt.Sprintf("Lone issue %d.", p)))
		got := members(t, resp.Message.Content)
		if len(got) == 2 {
			if got[0].key != "a1" || got[1].key != "a1" || !bytes.Equal(got[0].value, got[1].value) {
				t.Errorf("answer %s, want a1 twice with the same value", resp.Message.Content)
			}
			return
		}
	}
	t.Errorf("no duplicate in 200 packs of one at rate 1")
}

// TestPackedNotPacked checks the fallbacks: a user message that is not
// pack.Tasks' seeds entries by id, and a schema without ids gets {}.
func TestPackedNotPacked(t *testing.T) {
	t.Parallel()
	m := newModel(t, sim.Config{Seed: 2})
	req := packRequest(entrySchema, "a", "b")
	req.Messages[1].Content = "not a tasks message"
	got := members(t, generate(t, t.Context(), m, req).Message.Content)
	if len(got) != 2 || got[0].key != "a1" || got[1].key != "a2" || bytes.Equal(got[0].value, got[1].value) {
		t.Errorf("answer %v, want a1 and a2 with different values", got)
	}
	req.Output.Schema = json.RawMessage(`{"type":"object"}`)
	if got := generate(t, t.Context(), m, req).Message.Content; got != "{}" {
		t.Errorf("answer to a pack schema without ids = %s, want {}", got)
	}
	req.Output.Schema = json.RawMessage(`{"required":"a1"}`)
	if _, err := m.Generate(t.Context(), req); err == nil || !strings.Contains(err.Error(), "pack output schema") {
		t.Errorf("Generate with required a string = %v, want a pack output schema error", err)
	}
}

// TestPackedToolTurn checks that a packed request with tools still calls
// them first: packing changes only the final answer.
func TestPackedToolTurn(t *testing.T) {
	t.Parallel()
	req := packRequest(entrySchema, "a", "b")
	req.Tools = []llm.ToolDef{readFileTool}
	m := newModel(t, sim.Config{})
	resp := generate(t, t.Context(), m, req)
	if resp.FinishReason != llm.FinishToolCalls || len(resp.Message.ToolCalls) != 1 {
		t.Errorf("Generate = %+v, want a tool call", resp)
	}
	if st := m.Stats(); st.Packed != 0 {
		t.Errorf("Stats = %+v, want no packed answer", st)
	}
}

// TestPackedPositionBias checks that position bias makes entries wrong
// but valid, more often the later they sit in the pack, never the first,
// and that a wrong entry differs from the task's answer alone.
func TestPackedPositionBias(t *testing.T) {
	t.Parallel()
	s, err := schema.Compile(json.RawMessage(entrySchema))
	if err != nil {
		t.Fatal(err)
	}
	const k, packs, bias = 10, 60, 0.5
	m := newModel(t, sim.Config{Seed: 11, PositionBias: bias})
	alone := newModel(t, sim.Config{Seed: 11})
	wrongAt := make([]int, k)
	wrong := 0
	for p := range packs {
		tasks := tasksOf(fmt.Sprintf("Pack %d issue", p), k)
		req := packRequest(entrySchema, tasks...)
		if got := sim.PackSize(req); got != k {
			t.Fatalf("PackSize = %d, want %d", got, k)
		}
		got := members(t, generate(t, t.Context(), m, req).Message.Content)
		if len(got) != k {
			t.Fatalf("pack %d: %d members, want %d (bias leaves every id in place)", p, len(got), k)
		}
		for i, task := range tasks {
			if want := fmt.Sprintf("a%d", i+1); got[i].key != want {
				t.Fatalf("pack %d: member %d is %q, want %q", p, i, got[i].key, want)
			}
			if err := s.Validate(got[i].value); err != nil {
				t.Errorf("pack %d entry %d = %s: Validate = %v, want a valid (if wrong) answer", p, i, got[i].value, err)
			}
			if string(got[i].value) != generate(t, t.Context(), alone, aloneRequest(entrySchema, task)).Message.Content {
				wrongAt[i]++
				wrong++
			}
		}
	}
	if wrongAt[0] != 0 {
		t.Errorf("first entries wrong %d times, want never (rate p·0/(k-1))", wrongAt[0])
	}
	// Expected: packs·bias·i/(k-1) at position i; the last third against
	// the first third shows the growth.
	early, late := wrongAt[1]+wrongAt[2]+wrongAt[3], wrongAt[7]+wrongAt[8]+wrongAt[9]
	if late <= 2*early {
		t.Errorf("wrong entries by position %v: last three %d, want well over twice the first three's %d", wrongAt, late, early)
	}
	mean := float64(wrong) / float64(packs*k)
	if mean < bias/2-0.1 || mean > bias/2+0.1 {
		t.Errorf("wrong share %.3f, want about %.2f (bias/2)", mean, bias/2)
	}
	if st := m.Stats(); st.Biased != int64(wrong) {
		t.Errorf("Stats.Biased = %d, want %d wrong entries", st.Biased, wrong)
	}
	if got := sim.PackSize(aloneRequest(entrySchema, "x")); got != 0 {
		t.Errorf("PackSize(unpacked) = %d, want 0", got)
	}
}

// TestPositionBiasRange checks that a bias outside [0, 1] is refused by
// name.
func TestPositionBiasRange(t *testing.T) {
	t.Parallel()
	for _, p := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := sim.New(sim.Config{PositionBias: p}); err == nil || !strings.Contains(err.Error(), "position_bias") {
			t.Errorf("New(PositionBias: %v) = %v, want an error naming position_bias", p, err)
		}
	}
}
